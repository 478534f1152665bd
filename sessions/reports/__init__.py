"""What renders documents and their analyses: views, tables, summaries, the exports and their formats."""
