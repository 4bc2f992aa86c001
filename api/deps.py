"""FastAPI dependencies as type aliases: routes take ``session: SessionDep`` and so on."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from sqlalchemy.orm import Session

from api.db import get_session
from api.settings import Settings, get_settings
from api.storage import get_store
from veernet_core.checkpoint import LocalStore, S3Store

SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[LocalStore | S3Store, Depends(get_store)]
