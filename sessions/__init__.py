"""The session document: model, storage, diff, groups and export. No Textual here."""
