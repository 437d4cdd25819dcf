"""Model servers' own lines, one module an engine."""
