"""A CSV file that is not valid in the chosen encoding is refused when the Session is
created, before anything is read into the engine or spent.

Without this check, a Latin-1 file read as UTF-8 (the default) is silently damaged:
DuckDB's reader skips every line holding an invalid UTF-8 byte (``ignore_errors``, so
that no row value can make the read fail), and ``dpkit describe`` then summarised the
few lines left, with budget spent ("Rows -4", every column text). A UTF-16 file read as
UTF-8 gives column names full of NUL bytes.

What is checked (:func:`check_encoding`): the first :data:`ENCODING_SAMPLE_BYTES`
bytes of the file (of its decompressed text for ``.gz``), a fixed public number, from
the same start where DuckDB's sniffer takes its sample of rows. Like the sniffed
dialect and column types, what this start of the file says about its format is
treated as public; the rest of the file is never looked at here, so a byte past the
sample cannot change whether the file is refused (tests/adversarial/test_csv_encoding.py).
Refused, as :class:`~dpkit.errors.DataError` naming the file and the option to use
(not where the bad byte is: that would point at a row):

- a byte-order mark of another encoding than the chosen one (a UTF-16 mark read as
  UTF-8, a UTF-8 mark read as Latin-1 or UTF-16), or of UTF-32, which is not read;
- a sample that does not decode in the chosen encoding (a character that the sample's
  end cuts is not an error, even when the file ends there: whether it does is not in
  the sample, and such a last line is the reader's, as below; so a Latin-1 letter
  such as 0xE9 among the sample's last three bytes, which starts a UTF-8 sequence, is
  not caught here);
- under UTF-8, a NUL byte in the first line: the header of a UTF-16 file without a
  byte-order mark (DuckDB would make column names of ``"i\\x00d\\x00"``);
- under UTF-16, a file without a UTF-16 byte-order mark: Python's decoder needs it to
  tell the byte order (without it, it raised a ``UnicodeError`` from the transcoder),
  and a UTF-8 file read as UTF-16 has none.

Latin-1 decodes every byte, so under it only the byte-order marks are checked. A
UTF-8 byte-order mark under UTF-8 is fine (DuckDB skips it).

An invalid byte past the sample is left to the reader, which decides at creation too,
never after a charge: under UTF-8 DuckDB skips its line (``ignore_errors``; the file
is copied into a table when the Session is created); UTF-16 and Latin-1 files are
transcoded by Python with ``errors="replace"`` (U+FFFD); Spark's reader replaces it.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from pathlib import Path
from typing import Any

from dpkit.errors import DataError

__all__ = ["ENCODING_SAMPLE_BYTES", "check_encoding"]

#: How many bytes at the start of a CSV file are decoded in the chosen encoding before
#: the file is read: 64 KiB (a public constant, never the file's size).
ENCODING_SAMPLE_BYTES = 1 << 16

#: Byte-order marks, longest first (a UTF-32 LE mark starts with the UTF-16 LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_NAMES = {"utf-8": "UTF-8", "utf-16": "UTF-16", "latin-1": "Latin-1", "utf-32": "UTF-32"}


def check_encoding(file: Path, encoding: str, owner: str) -> None:
    """Refuse ``file`` if its first :data:`ENCODING_SAMPLE_BYTES` bytes are not valid
    in ``encoding`` (one of ``"utf-8"``, ``"utf-16"``, ``"latin-1"``); module docstring.

    A file that cannot be read as plain or gzip bytes is left to the engine, which
    refuses it by its error's class.

    Raises
    ------
    DataError
        Naming the file and the encoding to use instead.
    """
    data = _sample(file)
    if data is None:
        return
    problem = _problem(data, encoding)
    if problem is None:
        return
    what, suggestion = problem
    compressed = " of its decompressed text" if file.name.lower().endswith(".gz") else ""
    raise DataError(
        f"{owner}: {file.name!r} {what.format(text=compressed)}. {suggestion} The "
        f"encoding is checked on the first {ENCODING_SAMPLE_BYTES // 1024} KiB of the "
        "file, before it is read; nothing was spent."
    )


def _sample(file: Path) -> bytes | None:
    """The first :data:`ENCODING_SAMPLE_BYTES` bytes of ``file`` (decompressed if
    ``.gz``; all of it if shorter), or None if it cannot be read so."""
    opener: Any = gzip.open if file.name.lower().endswith(".gz") else open
    try:
        with opener(file, "rb") as stream:
            data: bytes = stream.read(ENCODING_SAMPLE_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    return data


def _problem(data: bytes, encoding: str) -> tuple[str, str] | None:
    """(what is wrong with the sample, what to do), or None if it is valid. The first
    part follows the file's name; ``{text}`` in it marks where to say "of its
    decompressed text"."""
    chosen = f"{_NAMES[encoding]} (the encoding it is read in)"
    for bom, marked in _BOMS:
        if data.startswith(bom):
            if marked != encoding:
                what = f"starts with a {_NAMES[marked]} byte-order mark: it is not {chosen}"
                return what, _use(marked)
            break
    if encoding == "latin-1":
        return None  # every byte is a Latin-1 character
    if encoding == "utf-16" and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        # Python's UTF-16 reader needs the mark to know the byte order.
        what = (
            f"does not start with a UTF-16 byte-order mark, which {chosen} needs to tell "
            "the byte order"
        )
        return what, (
            f"If it is UTF-8, {_option('utf-8')}; if it is Latin-1, {_option('latin-1')}. "
            "If it is UTF-16 without the mark, convert it to UTF-8 first (e.g. iconv -f "
            "UTF-16LE -t UTF-8)."
        )
    if encoding == "utf-8" and b"\x00" in data.split(b"\n", 1)[0]:
        what = (
            f"is not {chosen}: its first line{{text}} holds a NUL byte, as the header of "
            "a UTF-16 file without a byte-order mark does"
        )
        return what, (
            "If it is UTF-16, convert it to UTF-8 (e.g. iconv -f UTF-16LE -t UTF-8), or "
            f"add a byte-order mark and {_option('utf-16')}."
        )
    try:
        # final=False: a character cut by the sample's end is not an error (module
        # docstring), so the answer is a function of these bytes alone.
        codecs.getincrementaldecoder(encoding)("strict").decode(data, final=False)
    except UnicodeError:
        # Where the bad byte is would say which row holds it: a fact about row values,
        # which the analyst is never told (DESIGN: the Session's threat model).
        what = f"is not valid {chosen}: a byte in its start{{text}} does not decode"
        return what, _other_than(encoding)
    return None


def _option(encoding: str) -> str:
    """How to choose ``encoding``, in both front ends."""
    if encoding == "utf-8":
        return "leave the encoding out (UTF-8 is the default)"
    return (
        f"read it with --encoding {encoding} on the command line, or "
        f"encoding={encoding!r} in Session.from_path"
    )


def _use(encoding: str) -> str:
    """What to do with a file in ``encoding`` (from its byte-order mark)."""
    if encoding == "utf-32":
        return (
            "dpkit reads UTF-8, UTF-16 and Latin-1: convert the file to UTF-8 first "
            "(e.g. iconv -f UTF-32 -t UTF-8)."
        )
    return f"It is {_NAMES[encoding]}: {_option(encoding)}."


def _other_than(encoding: str) -> str:
    """The likely encodings of a file that is not valid in ``encoding``."""
    if encoding == "utf-8":
        return (
            "If it is Latin-1 (ISO-8859-1, as Excel and many Windows programs save CSV "
            f"files), {_option('latin-1')}; if it is UTF-16, use utf-16 the same way. "
            "If it is UTF-8 with a few damaged bytes, repair them (e.g. iconv -c -f UTF-8 "
            "-t UTF-8) or read it as Latin-1."
        )
    return f"If it is UTF-8, {_option('utf-8')}; if it is Latin-1, {_option('latin-1')}."
