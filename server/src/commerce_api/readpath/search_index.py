"""Search in memory: which slots of the catalogue hold words beginning with each word asked.

A search (``q``) matches a product when every word of it begins a word of the product's name
or description (``catalog.search_repository.search_words`` splits both the same way: runs of
letters and digits, lower-cased). The database's full-text index answers that too, but at a
million products a word in 5 % of them costs ~0.1 s to list and as much to order; here it is
a few milliseconds.

The index is built once over the slots of a ``CatalogIndex`` (``build_search``) and compact:
- the words, sorted, in a ``TextColumn`` — the words beginning with ``us`` are one range of
  it, found by bisection;
- each word's slots, ascending, in one ``array('i')`` (a word's are ``starts[w]`` up to
  ``starts[w + 1]``); a word held by more than 1/``DENSE_SHARE`` of the slots is a bitmap
  instead (``bytes``, one bit a slot: 125 KB at a million, where its slots would take 4 bytes
  each) — the words nearly every product says cost the least;
- each slot's text's CRC-32, so a change that leaves name and description as they were (a
  price edit) costs nothing here.

A product whose words changed since the build, and every product added since, is *stale*: its
built entries are ignored and its current words are kept in a small inverted index of their
own (``_changed_words``). A search is the build's answer minus the stale slots, plus the
changed ones' answer (the two never share a slot). Past ``REBUILD_ABOVE`` stale slots the
owner builds the index again.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import defaultdict
from collections.abc import Iterable
from zlib import crc32

from commerce_api.readpath.columns import TextColumn

WORD = re.compile(r"[^\W_]+")  # as ``catalog.search_repository.search_words`` splits a search
DENSE_SHARE = 32  # a word in more than 1/32 of the slots is a bitmap
REBUILD_ABOVE = 50_000  # stale slots past which the owner builds the index again


def words_of(name: str, description: str | None) -> set[str]:
    """The distinct words of a product's name and description, lower-cased."""
    return set(WORD.findall(f"{name} {description or ''}".lower()))


def text_hash(name: str, description: str | None) -> int:
    return crc32(f"{name}\x00{description or ''}".encode())


def bitmap(slots: Iterable[int], size: int) -> bytearray:
    """``slots`` (each below ``size``) as a bitmap: bit ``slot % 8`` of byte ``slot // 8``."""
    bits = bytearray((size + 7) // 8)
    for slot in slots:
        bits[slot >> 3] |= 1 << (slot & 7)
    return bits


def _as_bytes(bits: int) -> bytes:
    """A bitmap held as an int, as bytes in the order ``bitmap`` writes (bit ``slot % 8`` of
    byte ``slot // 8``)."""
    return bits.to_bytes((bits.bit_length() + 7) // 8 or 1, "little")


def _bit_slots(bits: int) -> list[int]:
    """The positions of the bits set in ``bits``, ascending."""
    found: list[int] = []
    data = _as_bytes(bits)
    for match in _NONZERO.finditer(data):
        at = match.start() * 8
        for byte in match.group():
            if byte:
                found.extend(at + bit for bit in _BYTE_BITS[byte])
            at += 8
    return found


_NONZERO = re.compile(rb"[^\x00]+")
_BYTE_BITS = [tuple(bit for bit in range(8) if byte >> bit & 1) for byte in range(256)]


class Matches:
    """The slots a search matched: the build's (a bitmap or a set; stale slots taken out)
    and the changed ones' (a set)."""

    __slots__ = ("_bits", "_bytes", "built", "changed")

    def __init__(self, built: int | set[int], changed: set[int]) -> None:
        self.built = built
        self.changed = changed
        self._bits = built if isinstance(built, int) else None
        self._bytes: bytes | None = None

    def __len__(self) -> int:
        built = self.built
        return (built.bit_count() if isinstance(built, int) else len(built)) + len(self.changed)

    def slots(self) -> list[int]:
        """Every matched slot, in no particular order."""
        built = self.built
        found = _bit_slots(built) if isinstance(built, int) else list(built)
        found.extend(self.changed)
        return found

    def member(self) -> tuple[bytes | set[int], set[int]]:
        """What a membership test reads: the build's bitmap as bytes (or its set), and the
        changed slots."""
        if self._bits is None:
            assert isinstance(self.built, set)
            return self.built, self.changed
        if self._bytes is None:
            self._bytes = _as_bytes(self._bits)
        return self._bytes, self.changed


class SearchIndex:
    """The words of every slot of a catalogue index (see the module's docstring)."""

    def __init__(
        self,
        size: int,
        words: TextColumn,
        starts: array[int],
        postings: array[int],
        dense: dict[int, bytes],
        hashes: array[int],
    ) -> None:
        self.size = size  # slots of the build; later ones are all changed ones
        self._words = words
        self._starts = starts
        self._postings = postings
        self._dense = dense
        self._dense_words = sorted(dense)
        self._hashes = hashes
        self._stale: set[int] = set()
        self._stale_bytes = bytearray((size + 7) // 8)
        self._stale_bits: int | None = 0  # ``_stale_bytes`` as an int (None: to redo)
        self._changed: dict[int, tuple[str, ...]] = {}  # a changed slot's current words
        self._changed_words: dict[str, set[int]] = {}
        self._changed_sorted: list[str] = []

    def drift(self) -> int:
        """How many slots changed their words since the build (or came after it)."""
        return len(self._stale) + sum(1 for slot in self._changed if slot >= self.size)

    # --- changes ------------------------------------------------------------------------------

    def update(self, slot: int, name: str, description: str | None) -> None:
        """Slot ``slot`` (new, or known) now says ``name`` and ``description``."""
        hashed = text_hash(name, description)
        if slot < self.size and slot not in self._stale and self._hashes[slot] == hashed:
            return
        self._forget(slot)
        if slot < self.size:
            self._mark_stale(slot)
        words = tuple(sorted(words_of(name, description)))
        self._changed[slot] = words
        for word in words:
            holders = self._changed_words.get(word)
            if holders is None:
                holders = self._changed_words[word] = set()
                insort(self._changed_sorted, word)
            holders.add(slot)

    def drop(self, slot: int) -> None:
        """Slot ``slot`` is no product any more (archived)."""
        self._forget(slot)
        if slot < self.size:
            self._mark_stale(slot)

    def _mark_stale(self, slot: int) -> None:
        if slot not in self._stale:
            self._stale.add(slot)
            self._stale_bytes[slot >> 3] |= 1 << (slot & 7)
            self._stale_bits = None

    def _forget(self, slot: int) -> None:
        for word in self._changed.pop(slot, ()):
            holders = self._changed_words[word]
            holders.discard(slot)
            if not holders:
                del self._changed_words[word]
                del self._changed_sorted[bisect_left(self._changed_sorted, word)]

    # --- reads --------------------------------------------------------------------------------

    def matches(self, words: list[str]) -> Matches:
        """The slots holding a word beginning with each of ``words`` (at least one)."""
        built: int | set[int] | None = None
        changed: set[int] | None = None
        for word in words:
            found = self._built(word)
            if built is None:
                built = found
            elif isinstance(built, int) and isinstance(found, int):
                built &= found
            else:
                built = _intersect(built, found)
            held = self._held(word)
            changed = held if changed is None else changed & held
        assert built is not None
        assert changed is not None
        if isinstance(built, int):
            if self._stale_bits is None:
                self._stale_bits = int.from_bytes(self._stale_bytes, "little")
            built &= ~self._stale_bits
        else:
            built -= self._stale
        return Matches(built, changed)

    def _built(self, word: str) -> int | set[int]:
        """The build's slots holding a word that begins with ``word`` (stale ones too)."""
        prefix = word.encode()
        words, starts, postings, dense = self._words, self._starts, self._postings, self._dense
        count = len(words)
        low = bisect_left(range(count), prefix, key=words.get)
        high = bisect_right(range(count), prefix, lo=low, key=lambda w: words.get(w)[: len(prefix)])
        # The words of a range have their slots side by side (a dense one has none there):
        # one slice holds them all, however many words begin with ``word``.
        found = set(postings[starts[low] : starts[high]])
        bits = 0
        dense_words = self._dense_words
        for at in dense_words[bisect_left(dense_words, low) : bisect_left(dense_words, high)]:
            bits |= int.from_bytes(dense[at], "little")
        if not bits:
            return found
        if found:
            bits |= int.from_bytes(bitmap(found, self.size), "little")
        return bits

    def _held(self, word: str) -> set[int]:
        """The changed slots holding a word that begins with ``word``."""
        ordered = self._changed_sorted
        held: set[int] = set()
        at = bisect_left(ordered, word)
        while at < len(ordered) and ordered[at].startswith(word):
            held |= self._changed_words[ordered[at]]
            at += 1
        return held


def _intersect(one: int | set[int], other: int | set[int]) -> set[int]:
    """Two match sets' common slots (at least one of them a set)."""
    if isinstance(one, set) and isinstance(other, set):
        return one & other
    small, bits = (one, other) if isinstance(one, set) else (other, one)
    assert isinstance(small, set)
    assert isinstance(bits, int)
    data = _as_bytes(bits)
    end = len(data) * 8
    return {slot for slot in small if slot < end and data[slot >> 3] >> (slot & 7) & 1}


class SearchBuilder:
    """A ``SearchIndex`` of ``size`` slots, its products' words given a few at a time
    (``add``); a slot never given holds no word (a product archived before they were read)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._holders: defaultdict[str, list[int]] = defaultdict(list)
        self._hashes = array("I", bytes(4 * size))

    def add(self, slot: int, name: str, description: str | None) -> None:
        self._hashes[slot] = text_hash(name, description)
        holders = self._holders
        for word in words_of(name, description):
            holders[word].append(slot)

    def finish(self) -> SearchIndex:
        holders, size = self._holders, self.size
        ordered = sorted(holders)
        words = TextColumn()
        words.extend(ordered)
        starts = array("I")
        postings = array("i")
        dense: dict[int, bytes] = {}
        dense_above = size // DENSE_SHARE
        for at, word in enumerate(ordered):
            slots = holders.pop(word)
            starts.append(len(postings))
            if len(slots) > dense_above:
                dense[at] = bytes(bitmap(slots, size))
            else:
                slots.sort()
                postings.extend(slots)
        starts.append(len(postings))
        return SearchIndex(size, words, starts, postings, dense, self._hashes)


def build_search(size: int, texts: Iterable[tuple[int, str, str | None]]) -> SearchIndex:
    """The index of ``size`` slots, each given at most once by ``texts`` as (slot, name,
    description)."""
    builder = SearchBuilder(size)
    for slot, name, description in texts:
        builder.add(slot, name, description)
    return builder.finish()
