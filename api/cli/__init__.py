"""The `veernet` command line: its commands, their HTTP client and views, the demo and process supervision.

Nothing here imports FastAPI, SQLAlchemy or torch at module level: `veernet worker` stays light in its
parent process, and the client commands need only typer, rich and httpx.
"""
