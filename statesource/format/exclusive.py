"""Create-if-absent on object stores: the exclusive half of the commit (FORMAT.md, section 9).

``pyarrow.fs`` has no conditional create, so on S3 the metadata is uploaded
with S3's conditional write (``PutObject`` with ``If-None-Match: *``), which
the store refuses with ``412 Precondition Failed`` when the object exists: of
two writers of one checkpoint id exactly one wins, as ``link`` decides on a
local file system. That request goes through boto3 (``pip install
statesource[s3]``), configured from the pyarrow ``S3FileSystem`` itself:
the same endpoint, region and explicit keys, or the same default credential
chain when none were given.

Where exclusivity cannot be had (no boto3, a file system other than S3, S3
options boto3 is not given here such as an assumed role), :func:`put_if_absent`
says so by returning False and the caller falls back to check-then-write.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pyarrow.fs as pafs

from statesource.errors import StorageAccessError
from statesource.format.storage import Location

_CONFLICT_RETRIES = 5
"""S3 answers 409 while another conditional write of the key is in flight: try again."""


class AlreadyExists(Exception):
    """The object exists: the conditional create lost."""


def put_if_absent(target: Location, payload: bytes) -> bool:
    """Create ``target`` holding ``payload`` only if it does not exist; raise
    :class:`AlreadyExists` if it does. False (nothing written) where this store or
    installation offers no conditional create."""
    client = s3_client(target.filesystem)
    if client is None:
        return False
    bucket, _, key = target.path.partition("/")
    from botocore.exceptions import BotoCoreError, ClientError

    for attempt in range(_CONFLICT_RETRIES):
        try:
            client.put_object(Bucket=bucket, Key=key, Body=payload, IfNoneMatch="*")
            return True
        except ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 412:
                raise AlreadyExists(str(target)) from None
            if status == 409 and attempt + 1 < _CONFLICT_RETRIES:
                time.sleep(0.1 * (attempt + 1))
                continue
            raise StorageAccessError(
                f"cannot publish {target} with a conditional write: {error}") from None
        except BotoCoreError as error:
            raise StorageAccessError(f"cannot publish {target}: {error}") from None
    raise AssertionError("unreachable: the last attempt returns or raises")


def _settings(filesystem: pafs.FileSystem) -> dict[str, Any] | None:
    """The S3 file system's own settings, where boto3 can act on them exactly."""
    if not isinstance(filesystem, pafs.S3FileSystem):
        return None
    try:
        import boto3  # noqa: F401 - only its presence is asked here
    except ImportError:
        return None
    settings: dict[str, Any] = filesystem.__reduce__()[1][0]  # pyarrow's pickled options
    if settings.get("role_arn") or settings.get("anonymous") or settings.get("proxy_options", {}
                                                                            ).get("host"):
        return None
    return settings


def s3_client(filesystem: pafs.FileSystem) -> Any | None:
    """A boto3 S3 client acting as ``filesystem`` does, or None where there is none to be had
    exactly (not S3, no boto3, settings boto3 is not given here). One per settings (and
    credentials in the environment) and process: making a client loads its service model,
    most of a second."""
    settings = _settings(filesystem)
    if settings is None:
        return None
    key = tuple(sorted((k, repr(v)) for k, v in settings.items())) + tuple(
        (name, os.environ.get(name, "")) for name in _CREDENTIAL_VARIABLES)
    return _client(key, settings)


_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                         "AWS_PROFILE")


_CLIENTS: dict[tuple[tuple[str, str], ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(key: tuple[tuple[str, str], ...], settings: dict[str, Any]) -> Any:
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            import boto3

            endpoint = settings.get("endpoint_override") or None
            if endpoint and "://" not in endpoint:
                endpoint = f"{settings.get('scheme') or 'https'}://{endpoint}"
            client = _CLIENTS[key] = boto3.session.Session().client(
                "s3", endpoint_url=endpoint, region_name=settings.get("region") or None,
                aws_access_key_id=settings.get("access_key") or None,
                aws_secret_access_key=settings.get("secret_key") or None,
                aws_session_token=settings.get("session_token") or None)
    return client
