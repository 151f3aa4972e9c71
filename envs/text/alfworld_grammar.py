"""TextWorld's grammar derivation for the ALFWorld games, with every template parsed once.

TextWorld's context-sensitive grammar words a PDDL game's feedback and commands, but it
re-parses every grammar template with TatSu and deep-copies its derivation contexts at every
step, which is almost all of a step's time. :class:`FastGrammar` derives the same text from
templates parsed once, with shallow contexts; it never touches TextWorld's module state.
"""

from __future__ import annotations

from typing import Any, ClassVar


def _textgen() -> Any:
    import textworld.envs.pddl.textgen as textgen

    return textgen


class FastGrammar:
    """TextWorld's ``ContextSensitiveGrammar.derive``, with every template parsed once.

    The derivation is the stock one step for step (same rule choice, same queries over the
    state, same evaluation of ``{...}`` expressions, same list wording); the differences are
    only in cost: parsed templates, parsed conditions and compiled expressions are cached,
    and a derivation context is shared instead of deep-copied (nothing mutates it).
    """

    # Parsed templates, parsed queries and compiled expressions, shared by every game.
    _symbols: ClassVar[dict[str, list[Any]]] = {}
    _queries: ClassVar[dict[str, Any]] = {}
    _code: ClassVar[dict[str, Any]] = {}

    def __init__(self, grammar: Any):
        """Wrap a TextWorld grammar (its rules are read, never changed)."""
        self._rules: dict[str, list[Any]] = grammar._rules
        self._tg = _textgen()
        self._globals = dict(vars(self._tg))  # what an expression sees in TextWorld, copied
        self._static: dict[tuple[str, frozenset[str]], bool] = {}

    def _parse(self, text: str) -> list[Any]:
        symbols = self._symbols.get(text)
        if symbols is None:
            symbols = self._tg._parse_and_convert(text, rule_name="symbols")
            self._symbols[text] = symbols
        return symbols

    def _query(self, expression: str) -> Any:
        rule = self._queries.get(expression)
        if rule is None:
            from textworld.logic import Rule

            rule = Rule.parse_conjunctive_query(expression)
            self._queries[expression] = rule
        return rule

    def _contexts(
        self, state: Any, infos: dict[str, Any], given: Any, variables: dict, mapping: dict
    ) -> list[tuple[dict, dict]]:
        if not given:
            return [(variables, mapping)]
        out = []
        for found in state.all_assignments(self._query(given), mapping):
            v = dict(variables)
            v.update({ph.name: infos[var.name] for ph, var in found.items()})
            m = dict(mapping)
            m.update(found)
            out.append((v, m))
        return out

    def _rule(self, state: Any, name: str, mapping: dict) -> Any:
        rules = self._rules.get(name)
        if not rules:
            raise self._tg.CSGUnknownSymbolError(name)
        for rule in rules:
            if not rule.condition:
                return rule
            query = self._query(rule.condition)
            if next(iter(state.all_assignments(query, mapping)), None) is not None:
                return rule
        raise IndexError("list index out of range")  # what the stock derivation raises

    def _eval(self, expression: str, variables: dict) -> Any:
        code = self._code.get(expression)
        if code is None:
            code = compile(expression, "<grammar>", "eval")
            self._code[expression] = code
        return eval(code, self._globals, dict(variables))

    def derive(
        self, state: Any, infos: dict[str, Any], start: str, variables: dict, mapping: dict
    ) -> str:
        """The text TextWorld derives from ``start`` in this state and context."""
        tg = self._tg
        out: list[str] = []
        stack = [(s, variables, mapping) for s in reversed(self._parse(start))]
        while stack:
            sym, var, mp = stack.pop()
            kind = type(sym)
            if kind is tg.TerminalSymbol:
                out.append(str(sym.symbol))
            elif kind is tg.NonterminalSymbol:
                rule = self._rule(state, str(sym.symbol), mp)
                stack.extend((s, var, mp) for s in reversed(rule.rhs))
            elif kind is tg.ConditionalSymbol:
                found = self._contexts(state, infos, sym.given, var, mp)
                stack.extend((sym.expression, v, m) for v, m in reversed(found))
            elif kind is tg.EvalSymbol:
                out.append(str(self._eval(sym.expression, var)))
            elif kind is tg.ListSymbol:
                inner = sym.symbol
                found = self._contexts(state, infos, inner.given, var, mp)
                items = [(inner.expression, v, m) for v, m in found]
                stack.extend(reversed(self._display_list(items, var, mp)))
            else:
                raise NotImplementedError(f"Unknown symbol: {kind}")
        return "".join(out)

    def is_static(self, start: str, dynamic: frozenset[str]) -> bool:
        """Whether the text of ``start`` depends on its context alone.

        That holds when no query or rule condition it can reach names a predicate in
        ``dynamic`` (one that actions change).
        """
        key = (start, dynamic)
        if key not in self._static:
            self._static[key] = self._symbols_static(self._parse(start), dynamic, set())
        return self._static[key]

    def _symbols_static(self, symbols: list[Any], dynamic: frozenset[str], seen: set[str]) -> bool:
        tg = self._tg
        for sym in symbols:
            kind = type(sym)
            if kind is tg.ListSymbol:
                sym = sym.symbol
                kind = type(sym)
            if kind is tg.ConditionalSymbol:
                if sym.given and not self._query_static(sym.given, dynamic):
                    return False
                if not self._symbols_static([sym.expression], dynamic, seen):
                    return False
            elif kind is tg.NonterminalSymbol:
                name = str(sym.symbol)
                if name in seen:
                    continue
                seen.add(name)
                for rule in self._rules.get(name, []):
                    if rule.condition and not self._query_static(rule.condition, dynamic):
                        return False
                    if not self._symbols_static(rule.rhs, dynamic, seen):
                        return False
        return True

    def _query_static(self, expression: str, dynamic: frozenset[str]) -> bool:
        names = {p.name.removeprefix("not_") for p in self._query(expression).preconditions}
        return not names & dynamic

    def _display_list(self, items: list[tuple], variables: dict, mapping: dict) -> list[tuple]:
        tg = self._tg
        if not items:
            return [(tg.NonterminalSymbol("list_empty"), variables, mapping)]
        if len(items) == 1:
            return items
        sep = (tg.NonterminalSymbol("list_separator"), variables, mapping)
        last = (tg.NonterminalSymbol("list_last_separator"), variables, mapping)
        joined: list[tuple] = []
        for item in items[:-1]:
            if joined:
                joined.append(sep)
            joined.append(item)
        return [*joined, last, items[-1]]
