"""The typed config schema (defaults, validation once per run) and the builders of problems, algorithms and plug-ins from their config nodes."""
