from inspector.cli import run

run()
