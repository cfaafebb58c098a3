"""The Pub/Sub emulator (Google's Cloud SDK component) as a process of the local stack."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dgb.config import dev as dev_settings
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import StackError, http_ok


class PubSubEmulator(ManagedProcess):
    name = "pubsub"
    start_timeout = 90.0

    @property
    def port(self) -> int:
        return self.s.pubsub_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/", expect=lambda b: b.strip().startswith(b"Ok"))

    def _launcher(self) -> str:
        explicit = dev_settings.pubsub_emulator_bin()
        candidates = [explicit] if explicit else []
        gcloud = shutil.which("gcloud")
        if gcloud:
            sdk = Path(os.path.realpath(gcloud)).parent.parent
            candidates.append(str(sdk / "platform/pubsub-emulator/bin/cloud-pubsub-emulator"))
        candidates.append("/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator")
        for c in candidates:
            if c and Path(c).exists():
                return c
        raise StackError(
            "pubsub: the Pub/Sub emulator is not installed; install Debian's "
            "google-cloud-cli-pubsub-emulator (see README, prerequisites)."
        )

    def argv(self) -> list[str]:
        data = self.s.state_dir / "pubsub"
        return [self._launcher(), f"--host={self.host}", f"--port={self.port}", f"--dir={data}"]

    def env(self) -> dict[str, str]:
        env = super().env()
        options = dev_settings.pubsub_java_options()
        if options:  # read by the JVM the emulator's launcher starts
            env["JAVA_TOOL_OPTIONS"] = f"{env.get('JAVA_TOOL_OPTIONS', '')} {options}".strip()
        return env

    def prepare(self) -> None:
        (self.s.state_dir / "pubsub").mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"pubsub emulator {self.host}:{self.port} project={self.s.gcp_project}"
