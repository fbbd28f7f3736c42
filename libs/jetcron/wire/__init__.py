"""Wire formats: subjects, messages, codec and JSON Schema export."""
