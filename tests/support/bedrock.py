"""Test doubles of the Bedrock classifier's surroundings: a recorded sleep and Bedrock's errors
(the fake client itself is dgb_dev.bedrock_fake, the one Bedrock fake)."""

from __future__ import annotations


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client_error(code: str, message: str = "x"):
    from botocore.exceptions import ClientError

    status = {"ThrottlingException": 429, "ServiceUnavailableException": 503}.get(code, 400)
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "Converse",
    )


def recorded(name: str) -> dict:
    """A Converse response of ``tests/fixtures/bedrock/`` (see its README)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures" / "bedrock" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))
