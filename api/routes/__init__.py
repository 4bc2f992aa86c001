"""HTTP routes; each one is short and only translates between HTTP and the FastAPI-free modules."""
