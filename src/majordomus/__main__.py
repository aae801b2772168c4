"""`python -m majordomus`."""

from majordomus.cli import main

raise SystemExit(main())
