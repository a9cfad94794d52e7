import pytest

from pipecat_harness.spoken import spoken_to_identifier


@pytest.mark.parametrize(
    ("spoken", "written"),
    [
        ("W as in whiskey two three seven eight one five six", "W2378156"),
        ("mei dot kovacs at example dot com", "mei.kovacs@example.com"),
        ("A B C dash seven", "ABC-7"),
        ("double seven oh one", "7701"),
        ("hash W 2378156.", "#W2378156"),
        ("yusuf underscore rossi underscore nine six two zero", "yusuf_rossi_9620"),
        ("", ""),
    ],
)
def test_spoken_identifiers_become_written(spoken, written):
    assert spoken_to_identifier(spoken) == written
