"""Parsers for the two filter languages terraform/modules/monitoring writes.

* Monitoring filters (alert conditions, dashboard charts), as documented on Cloud
  Monitoring's "Monitoring filters" page: ``selector comparator value`` terms joined by
  AND / OR / NOT and parentheses; selectors ``project``, ``group.id``,
  ``resource.type``, ``metric.type``, ``resource.labels.KEY``, ``metric.labels.KEY``,
  ``metadata.system_labels.KEY``, ``metadata.user_labels.KEY``; values are strings,
  numbers, booleans or one of the functions ``starts_with("s")``, ``ends_with("s")``,
  ``has_substring("s")``, ``monitoring.regex.full_match("re")`` and
  ``one_of("a", "b", ...)`` (comma-separated).
* The Logging query language (log-based metric filters), as documented on Cloud
  Logging's "Logging query language" page: ``field OP value`` comparisons with OP one
  of ``= != > < >= <= : =~ !~``, ``field:*`` for presence, AND / OR / NOT (or ``-``),
  implicit AND between adjacent terms, parentheses, and a parenthesized value
  expression on the right-hand side (``field = ("a" OR "b")``).

``parse_monitoring`` and ``parse_logging`` raise ``FilterSyntaxError`` on anything
outside their grammar. ``matches(tree, entry)`` evaluates a Logging query on a log
entry (a dict shaped like Cloud Logging's LogEntry: ``resource``, ``severity``,
``jsonPayload``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class FilterSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class Token:
    kind: str  # STRING, WORD, OP, LPAREN, RPAREN, COMMA, END
    text: str
    pos: int


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<STRING>"(?:[^"\\]|\\.)*")
      | (?P<OP>>=|<=|!=|=~|!~|[=<>:])
      | (?P<LPAREN>\()
      | (?P<RPAREN>\))
      | (?P<COMMA>,)
      | (?P<MINUS>-(?=[\w("]))
      | (?P<WORD>[A-Za-z0-9_.*/@\-]+)
    )""",
    re.X,
)


def tokenize(text: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise FilterSyntaxError(f"unexpected character at {pos}: {text[pos : pos + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append(Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    tokens.append(Token("END", "", len(text)))
    return tokens


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self, kind: str, text: str | None = None) -> Token:
        tok = self.tok
        if tok.kind != kind or (text is not None and tok.text != text):
            want = text or kind
            raise FilterSyntaxError(
                f"expected {want} at {tok.pos}, got {tok.text!r} in {self.text!r}"
            )
        self.i += 1
        return tok

    def at_word(self, *words: str) -> bool:
        return self.tok.kind == "WORD" and self.tok.text in words

    def done(self, tree: Any) -> Any:
        if self.tok.kind != "END":
            raise FilterSyntaxError(
                f"trailing {self.tok.text!r} at {self.tok.pos} in {self.text!r}"
            )
        return tree


# --------------------------------------------------------------------------------------
# Monitoring filters
# --------------------------------------------------------------------------------------

MONITORING_SELECTORS = re.compile(
    r"(project|group\.id|resource\.type|metric\.type"
    r"|(resource|metric)\.labels?\.[A-Za-z_][\w]*"
    r"|metadata\.(system|user)_labels\.[A-Za-z_][\w]*)$"
)
MONITORING_FUNCTIONS = {
    "starts_with": 1,
    "ends_with": 1,
    "has_substring": 1,
    "monitoring.regex.full_match": 1,
    "one_of": None,  # one or more, comma-separated
}


class _MonitoringParser(_Parser):
    def parse(self) -> Any:
        return self.done(self.or_())

    def or_(self) -> Any:
        items = [self.and_()]
        while self.at_word("OR"):
            self.i += 1
            items.append(self.and_())
        return items[0] if len(items) == 1 else ("OR", items)

    def and_(self) -> Any:
        items = [self.not_()]
        while self.at_word("AND"):
            self.i += 1
            items.append(self.not_())
        return items[0] if len(items) == 1 else ("AND", items)

    def not_(self) -> Any:
        if self.at_word("NOT"):
            self.i += 1
            return ("NOT", self.not_())
        if self.tok.kind == "LPAREN":
            self.i += 1
            inner = self.or_()
            self.take("RPAREN")
            return inner
        return self.term()

    def term(self) -> Any:
        selector = self.take("WORD").text
        if not MONITORING_SELECTORS.match(selector):
            raise FilterSyntaxError(f"unknown selector {selector!r} in {self.text!r}")
        op = self.take("OP").text
        if op not in ("=", "!=", ":", "<", ">", "<=", ">="):
            raise FilterSyntaxError(f"operator {op!r} is not a Monitoring comparator")
        return ("CMP", selector, op, self.value())

    def value(self) -> Any:
        if self.tok.kind == "STRING":
            return ("STR", _unquote(self.take("STRING").text))
        word = self.take("WORD").text
        if word in MONITORING_FUNCTIONS:
            self.take("LPAREN")
            args = [_unquote(self.take("STRING").text)]
            while self.tok.kind == "COMMA":
                self.i += 1
                args.append(_unquote(self.take("STRING").text))
            self.take("RPAREN")
            arity = MONITORING_FUNCTIONS[word]
            if arity is not None and len(args) != arity:
                raise FilterSyntaxError(f"{word} takes {arity} argument(s), got {len(args)}")
            return ("FN", word, args)
        if re.fullmatch(r"-?\d+(\.\d+)?|true|false", word):
            return ("LIT", word)
        raise FilterSyntaxError(f"{word!r} is not a Monitoring filter value in {self.text!r}")


def parse_monitoring(text: str) -> Any:
    return _MonitoringParser(text).parse()


def comparisons(tree: Any) -> list[tuple[str, str, Any]]:
    """Every (selector/field, operator, value) of a parsed filter."""
    if tree[0] == "CMP":
        return [tree[1:]]
    if tree[0] == "NOT":
        return comparisons(tree[1])
    if tree[0] in ("AND", "OR"):
        return [c for item in tree[1] for c in comparisons(item)]
    return []


# --------------------------------------------------------------------------------------
# Logging query language
# --------------------------------------------------------------------------------------

LOGGING_OPS = ("=", "!=", ">", "<", ">=", "<=", ":", "=~", "!~")
FIELD = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_@][\w]*)*$")


class _LoggingParser(_Parser):
    def parse(self) -> Any:
        return self.done(self.or_())

    def or_(self) -> Any:
        items = [self.and_()]
        while self.at_word("OR"):
            self.i += 1
            items.append(self.and_())
        return items[0] if len(items) == 1 else ("OR", items)

    def and_(self) -> Any:
        items = [self.not_()]
        while True:
            if self.at_word("AND"):
                self.i += 1
            elif self.tok.kind in ("END", "RPAREN") or self.at_word("OR"):
                break
            items.append(self.not_())  # adjacent terms: implicit AND
        return items[0] if len(items) == 1 else ("AND", items)

    def not_(self) -> Any:
        if self.at_word("NOT") or self.tok.kind == "MINUS":
            self.i += 1
            return ("NOT", self.not_())
        if self.tok.kind == "LPAREN":
            self.i += 1
            inner = self.or_()
            self.take("RPAREN")
            return inner
        return self.comparison()

    def comparison(self) -> Any:
        field = self.take("WORD").text
        if not FIELD.match(field) or field in ("AND", "OR", "NOT"):
            raise FilterSyntaxError(f"{field!r} is not a field path in {self.text!r}")
        op = self.take("OP").text
        if op == ":" and self.tok.kind == "WORD" and self.tok.text == "*":
            self.i += 1
            return ("PRESENT", field)
        return ("CMP", field, op, self.value_expr())

    def value_expr(self) -> Any:
        if self.tok.kind == "LPAREN":
            self.i += 1
            values = [self.value()]
            while self.at_word("OR"):
                self.i += 1
                values.append(self.value())
            self.take("RPAREN")
            return ("ANY", values)
        return self.value()

    def value(self) -> Any:
        if self.tok.kind == "STRING":
            return ("STR", _unquote(self.take("STRING").text))
        word = self.take("WORD").text
        if word in ("AND", "OR", "NOT"):
            raise FilterSyntaxError(f"value expected, got {word!r} in {self.text!r}")
        if self.tok.kind == "LPAREN":
            raise FilterSyntaxError(f"{word}(...) is not a Logging query value in {self.text!r}")
        return ("STR", word)


def parse_logging(text: str) -> Any:
    return _LoggingParser(text).parse()


SEVERITIES = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT",
              "EMERGENCY"]  # fmt: skip
_MISSING = object()


def _field(entry: dict, path: str) -> Any:
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _compare(field: str, actual: Any, op: str, wanted: str) -> bool:
    if actual is _MISSING or actual is None:
        return op == "!="
    if field == "severity":
        a, w = SEVERITIES.index(str(actual).upper()), SEVERITIES.index(wanted.upper())
    elif isinstance(actual, int | float) and not isinstance(actual, bool):
        try:
            a, w = actual, float(wanted)
        except ValueError:
            a, w = str(actual), wanted
    else:
        a, w = str(actual), wanted
    if op == "=":
        return a == w
    if op == "!=":
        return a != w
    if op == ":":
        return str(w).lower() in str(a).lower()
    if op == "=~":
        return re.search(wanted, str(actual)) is not None
    if op == "!~":
        return re.search(wanted, str(actual)) is None
    if isinstance(a, str) != isinstance(w, str):
        return False
    return {">": a > w, "<": a < w, ">=": a >= w, "<=": a <= w}[op]


def matches(tree: Any, entry: dict) -> bool:
    kind = tree[0]
    if kind == "AND":
        return all(matches(t, entry) for t in tree[1])
    if kind == "OR":
        return any(matches(t, entry) for t in tree[1])
    if kind == "NOT":
        return not matches(tree[1], entry)
    if kind == "PRESENT":
        return _field(entry, tree[1]) not in (_MISSING, None)
    _, field, op, value = tree
    actual = _field(entry, field)
    if value[0] == "ANY":
        return any(_compare(field, actual, op, v[1]) for v in value[1])
    return _compare(field, actual, op, value[1])
