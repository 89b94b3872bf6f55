"""A hand-in's own dependencies: what it declares (`declared`), refused entries as findings."""
