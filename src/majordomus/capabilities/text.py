"""One-line text arguments: the rule the server applies and the JSON Schema `pattern` that says the same.

A client that trusts a tool's `inputSchema` must never send a value the server then refuses (a blank
`external_id` was allowed by the schema and refused by the handler). The server trims with `str.strip()`;
the character classes below spell out exactly what that strips, so the pattern means the same in
ECMA-262 (what JSON Schema names) and in Python's `re` (what the tests check it with).
"""

from __future__ import annotations

# What str.strip() removes: every code point whose str.isspace() is true (tests/capabilities checks the list).
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _escaped(chars: str) -> str:
    """The characters as a class body of \\uXXXX escapes, runs written as ranges (the same in ECMA-262 and re)."""
    codes = sorted(ord(ch) for ch in chars)
    runs: list[list[int]] = []
    for code in codes:
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in runs)


_WS = _escaped(WHITESPACE)
_CONTROL = "\\u0000-\\u001f\\u007f"
_LINE_BREAK = "\\u000a\\u000d"

# Blank-trimmed, at least one visible character, no control character inside (what check_external_id asks)
EXTERNAL_ID_PATTERN = f"^[{_WS}]*[^{_WS}{_CONTROL}](?:[^{_CONTROL}]*[^{_WS}{_CONTROL}])?[{_WS}]*$"
# Blank-trimmed, at least one visible character, no line break inside (what announce asks of an intent)
ONE_LINE_PATTERN = f"^[{_WS}]*[^{_WS}](?:[^{_LINE_BREAK}]*[^{_WS}])?[{_WS}]*$"
