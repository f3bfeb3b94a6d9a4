"""Writing, inspecting and verifying SavedModels for TF Serving (the SavedModel issue).

Nothing is exported from here yet: the writer, `inspect` and `verify` land with that issue.
"""
