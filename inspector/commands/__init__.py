"""One module per command of the CLI. Each holds `NAME`, `add_parser(subparsers)` (its arguments) and
`run(args) -> exit code`; `inspector.cli` lists them, builds the parser and dispatches.

A command module imports nothing heavy at its top: the CLI loads every one of them to build its parser.
"""
