"""Storage torture: the crash-point sweep and the corruption sweep (`python -m tools.torture crash|corrupt`).
Figures and method: docs/reliability.md."""
