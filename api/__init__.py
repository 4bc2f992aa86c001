"""The VeerNet job service: HTTP API, settings, tables and the job state machine."""
