"""The session document: its model and vocabulary, the one constructor, storage, codec, migrations, paths, the
study plan and the options' spec."""
