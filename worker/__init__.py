"""VeerNet workers: the Celery app (``worker.celery_app``), thin tasks and the training runner.

The Celery parent process never imports torch; each job runs in a fresh child that does.
"""
