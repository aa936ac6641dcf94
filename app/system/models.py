"""System settings (seed V130) and the LLM models an operator registered."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model, db

EXTRACTION_MODEL_KEY = "memory.extractionModelId"


class SystemSetting(Model):
    __tablename__ = "system_setting"

    setting_key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text, nullable=False, default="")
    category: Mapped[str] = mapped_column(sa.String(64), nullable=False, default="")
    description: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    editable: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.setting_key,
            "value": self.value,
            "category": self.category,
            "description": self.description,
            "editable": bool(self.editable),
        }


class LlmModel(Model):
    """A chat model. Keys never live here: `api_key_env` names the variable that holds one."""

    __tablename__ = "llm_model"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(64), unique=True, nullable=False)
    model: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    base_url: Mapped[str | None] = mapped_column(sa.String(512))
    api_key_env: Mapped[str | None] = mapped_column(sa.String(128))
    is_default: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "model": self.model,
                "isDefault": bool(self.is_default)}

    @classmethod
    def default(cls) -> LlmModel | None:
        return db.session.scalar(
            sa.select(cls).where(cls.is_default.is_(True)).order_by(cls.id).limit(1)
        )

    @classmethod
    def all_ordered(cls) -> list[LlmModel]:
        return list(db.session.scalars(sa.select(cls).order_by(cls.id)))


def _chosen_model() -> sa.Select:
    configured = (sa.select(SystemSetting.value)
                  .where(SystemSetting.setting_key == sa.bindparam("setting_key"))
                  .scalar_subquery())
    named = LlmModel.id == sa.cast(sa.func.trim(configured), sa.Integer)
    return (sa.select(LlmModel.id, LlmModel.name, LlmModel.model, LlmModel.base_url,
                      LlmModel.api_key_env, named.label("named"), configured.label("configured"))
            .where(sa.or_(named, LlmModel.is_default.is_(True)))
            .order_by(named.desc(), LlmModel.id).limit(1))


# The model a setting names, else the default (D10), in one round trip: at most one row of
# (id, name, model, base_url, api_key_env, whether it is the one named, the setting's value).
# A module-level statement, so it can go in a batch (app.database.batches).
CHOSEN_MODEL = _chosen_model()
