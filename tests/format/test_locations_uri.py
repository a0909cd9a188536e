"""Full URIs: a resolved location gives back the URI it came from, scheme and query kept."""

from __future__ import annotations

import pickle

import pyarrow.fs as pafs
import pytest

from statesource.cli import main
from statesource.errors import InvalidArgumentError
from statesource.format.storage import redacted, resolve

S3 = "s3://bucket/some/root?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http"


def test_s3_uri_keeps_scheme_and_endpoint_query() -> None:
    location = resolve(S3)
    assert location.path == "bucket/some/root"
    assert location.uri == S3
    assert location.child("chk-1", "_metadata.json").uri == (
        "s3://bucket/some/root/chk-1/_metadata.json"
        "?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http")
    assert location.parent.uri == "s3://bucket/some?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http"
    assert str(location) == S3


@pytest.mark.parametrize("alias", ["s3a", "s3n", "S3A"])
def test_hadoop_s3_schemes_read_as_s3(alias: str) -> None:
    location = resolve(f"{alias}://bucket/root?region=eu-west-1")
    assert isinstance(location.filesystem, pafs.S3FileSystem)
    assert location.filesystem.region == "eu-west-1"
    assert location.path == "bucket/root"
    assert location.uri == "s3://bucket/root?region=eu-west-1"


def test_uri_resolves_to_the_same_place_again() -> None:
    location = resolve(S3).child("chk-3")
    again = resolve(location.uri)
    assert (again.path, again.uri) == (location.path, location.uri)
    assert again.filesystem.equals(location.filesystem)


def test_file_uri_and_local_path(tmp_path: object) -> None:
    assert resolve(f"file://{tmp_path}").uri == f"file://{tmp_path}"
    assert resolve(str(tmp_path)).uri == str(tmp_path)


def test_credentials_in_a_uri_are_kept_for_use_but_never_printed() -> None:
    location = resolve("s3://AKEY:SECRET@bucket/root?region=us-east-1")
    assert location.uri == "s3://AKEY:SECRET@bucket/root?region=us-east-1"
    assert "SECRET" not in str(location.child("x"))
    with pytest.raises(InvalidArgumentError) as refused:
        resolve("s3://AKEY:SECRET@bucket/root?nonsense=1")
    assert "SECRET" not in str(refused.value)


def test_credentials_in_query_parameters_are_never_printed_either() -> None:
    """pyarrow refuses them in S3 URIs, but messages quote what was typed, and other file
    systems' URIs may carry them."""
    assert redacted("s3://K:S@b/r?access_key=AKEY&secret_key=S3CR3T&session_token=T0KEN"
                    "&endpoint_override=localhost:9000&region=us-east-1 and more") == (
        "s3://***@b/r?access_key=***&secret_key=***&session_token=***"
        "&endpoint_override=localhost:9000&region=us-east-1 and more")
    assert redacted("https://a.blob/x?sv=1&sig=ABC&se=2 'http://h/x?X-Amz-Signature=Z'") == (
        "https://a.blob/x?sv=1&sig=***&se=2 'http://h/x?X-Amz-Signature=***'")
    with pytest.raises(InvalidArgumentError) as refused:
        resolve("s3://bucket/root?secret_key=S3CR3T")
    assert "S3CR3T" not in str(refused.value) and "secret_key=***'" in str(refused.value)


def test_secrets_holding_slashes_or_at_signs_are_left_out_whole() -> None:
    """A raw AWS secret may hold ``/``, a password ``@``: pyarrow refuses such URIs (they
    must be percent-encoded), and the refusal shows no part of the secret."""
    for uri, secret in (("s3://AKIA:abc/def+ghi@bucket/root", "def+ghi"),
                        ("s3://key:p@ss@bucket/x", "ss@")):
        with pytest.raises(InvalidArgumentError) as refused:
            resolve(uri)
        assert secret not in str(refused.value) and "s3://***@bucket/" in str(refused.value)


def test_distinct_local_paths_never_print_the_same(tmp_path) -> None:
    """Only a URI's origin and query are redacted: a local path that happens to hold
    ``?token=`` is shown whole, so files are never confused by their printed names."""
    first, second = (resolve(str(tmp_path / f"d?token=1/{name}")) for name in "ab")
    assert str(first) != str(second) and str(first).endswith("d?token=1/a")


def test_command_errors_quote_no_credentials(tmp_path, capsys) -> None:
    """What a user typed reaches the terminal in error messages, without its secrets."""
    assert main(["inspect", str(tmp_path / "gone?secret_key=S3CR3T")]) == 1
    said = capsys.readouterr().err
    assert "gone?secret_key=***" in said and "S3CR3T" not in said


def test_a_location_handed_on_keeps_its_uri_and_file_system() -> None:
    location = pickle.loads(pickle.dumps(resolve(S3)))
    assert resolve(location) is location
    assert location.uri == S3


def test_a_uri_with_its_file_system_given_is_a_path_on_that_file_system() -> None:
    given = pafs.S3FileSystem(region="us-east-1", access_key="k", secret_key="s")
    location = resolve(S3, given)
    assert location.filesystem is given
    assert (location.path, location.uri) == ("bucket/some/root", S3)
