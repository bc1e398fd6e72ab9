"""The Git adapters: the inventory source, the reports branch, commit signatures; the only modules that import
pygit2."""
