"""Regular expressions written by users (`--groups` rules files, the TUI's row filter): run with a time bound.

They are compiled with the `regex` package, whose matcher takes a timeout: a pattern that backtracks without end
(`(a|aa)+$` on a long name) stops after SEARCH_TIMEOUT_S with one line that names it, instead of hanging.
"""

from __future__ import annotations

import regex

from sessions.documents.errors import InputError

SEARCH_TIMEOUT_S = 0.5  # one search of one name; a sane pattern takes microseconds


class UserPattern:
    """A user's regular expression; `search` is `re.Pattern.search` with the time bound."""

    def __init__(self, pattern: str, where: str) -> None:
        """Compile `pattern`; `where` names it in messages (`rules.toml: roles[0].names`). A bad pattern is an
        InputError."""
        try:
            self._compiled = regex.compile(pattern)
        except (regex.error, ValueError, OverflowError) as exc:
            raise InputError(f"{where}: bad regular expression: {exc}") from None
        self.pattern, self.where = pattern, where

    def search(self, text: str) -> regex.Match[str] | None:
        """The first match in `text`, or None; an InputError where the search runs past SEARCH_TIMEOUT_S."""
        try:
            return self._compiled.search(text, timeout=SEARCH_TIMEOUT_S)
        except TimeoutError:
            raise InputError(f"{self.where}: the regular expression {self.pattern!r} ran over {SEARCH_TIMEOUT_S:g} s "
                             f"on {text[:60]!r} (it backtracks without end); simplify it") from None
