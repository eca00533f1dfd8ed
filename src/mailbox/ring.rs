//! Host-side bookkeeping of a slot ring: which slot the next request takes, with which
//! tag, which slots are still waiting for their response, and whose token each carries.
//!
//! Requests take slots strictly in sequence (slot `s % slots` for sequence number `s`),
//! because the device side serves them in sequence. Responses may arrive out of order; a
//! slot is free again once its response is reaped *and* every older slot is, so the
//! ring is full when the oldest unreaped request is `slots` submissions behind.
#![forbid(unsafe_code)]

use super::layout::tag_for_lap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub token: u32,
    pub tag: u32,
    pub pending: bool,
}

#[derive(Debug)]
pub(crate) struct SlotRing {
    entries: Box<[Entry]>,
    /// Slot the next request takes, and the lap it is on.
    head: usize,
    head_lap: u64,
    /// Oldest slot not yet freed, and how many slots from it up to `head` are taken.
    tail: usize,
    span: usize,
    pending: usize,
}

impl SlotRing {
    pub fn new(slots: usize) -> SlotRing {
        assert!(slots > 0);
        SlotRing {
            entries: vec![Entry::default(); slots].into_boxed_slice(),
            head: 0,
            head_lap: 0,
            tail: 0,
            span: 0,
            pending: 0,
        }
    }

    /// Requests submitted and not reaped.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Takes the next slot for `token`: `(slot, tag)`, or `None` when the ring is full.
    #[inline]
    pub fn reserve(&mut self, token: u32) -> Option<(usize, u32)> {
        if self.span == self.entries.len() {
            return None;
        }
        let slot = self.head;
        let tag = tag_for_lap(self.head_lap);
        self.entries[slot] = Entry {
            token,
            tag,
            pending: true,
        };
        self.head += 1;
        if self.head == self.entries.len() {
            self.head = 0;
            self.head_lap += 1;
        }
        self.span += 1;
        self.pending += 1;
        Some((slot, tag))
    }

    /// The `i`-th taken slot from the oldest (`i < span()`), and its entry.
    #[inline]
    pub fn nth(&self, i: usize) -> (usize, Entry) {
        debug_assert!(i < self.span);
        let mut slot = self.tail + i;
        if slot >= self.entries.len() {
            slot -= self.entries.len();
        }
        (slot, self.entries[slot])
    }

    /// Slots taken from the oldest unfreed one up to the newest.
    #[inline]
    pub fn span(&self) -> usize {
        self.span
    }

    /// Marks `slot`'s response reaped.
    #[inline]
    pub fn complete(&mut self, slot: usize) {
        debug_assert!(self.entries[slot].pending);
        self.entries[slot].pending = false;
        self.pending -= 1;
    }

    /// Frees the reaped slots at the old end.
    #[inline]
    pub fn advance(&mut self) {
        while self.span > 0 && !self.entries[self.tail].pending {
            self.tail += 1;
            if self.tail == self.entries.len() {
                self.tail = 0;
            }
            self.span -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::layout::tag_for;

    #[test]
    fn tags_follow_sequence_numbers_and_full_means_oldest_unreaped() {
        let mut r = SlotRing::new(3);
        for seq in 0..3u64 {
            assert_eq!(r.reserve(seq as u32), Some((seq as usize, tag_for(seq, 3))));
        }
        assert_eq!(r.reserve(9), None);
        // The newest completes first: still full, the oldest holds the ring.
        r.complete(2);
        r.advance();
        assert_eq!(r.reserve(9), None);
        assert_eq!(r.pending(), 2);
        r.complete(0);
        r.advance();
        assert_eq!(r.span(), 2);
        assert_eq!(r.nth(0).0, 1);
        assert_eq!(r.reserve(3), Some((0, tag_for(3, 3))));
        assert!(!r.nth(1).1.pending);
        assert_eq!(
            r.nth(2),
            (
                0,
                Entry {
                    token: 3,
                    tag: 2,
                    pending: true
                }
            )
        );
    }
}
