"""Where ``scripts/deploy_composer.py`` deploys: the Cloud Composer environment, its region and the
GCP project (``DGB_COMPOSER_ENV``, ``DGB_COMPOSER_LOCATION``, ``DGB_GCP_PROJECT``), the defaults of
its ``--environment`` / ``--location`` / ``--project``. None has a default: unset (or empty) is
None, and the script asks for it. Stdlib only: the deploy script runs without the venv."""

from __future__ import annotations

from dataclasses import dataclass

from dgb.config import env_str


def _optional(name: str) -> str | None:
    return env_str(name, "") or None


@dataclass(frozen=True)
class ComposerTarget:
    environment: str | None
    location: str | None
    # the project to deploy to: no local default here (Settings.gcp_project's local-dgb is the
    # emulator's project, never a deployment's)
    project: str | None

    @classmethod
    def from_env(cls) -> ComposerTarget:
        return cls(
            environment=_optional("DGB_COMPOSER_ENV"),
            location=_optional("DGB_COMPOSER_LOCATION"),
            project=_optional("DGB_GCP_PROJECT"),
        )
