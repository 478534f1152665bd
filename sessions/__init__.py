"""Session documents (`documents`), what they mean (`analyses`), how they read (`reports`). No Textual here."""
