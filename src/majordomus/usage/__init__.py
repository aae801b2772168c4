"""What each episode used: tokens per model, read from the client's own record of the conversation after the
episode ended, and what that cost by a dated price table. Ordinary Python; never on the hook path."""
