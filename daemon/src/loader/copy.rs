//! Binary COPY rows of pgbench_accounts' `(aid, bid)`: `aid, bid = (aid - 1) / 100000 + 1`.
//! `abalance = 0` and `filler = ''` (blank-padded to char(84), as pgbench's text COPY gives
//! it) come from column defaults the loader sets for the load and drops afterwards: the
//! server then takes one constant per row instead of receiving, padding and copying the
//! filler of each, which is about a fifth of its COPY time (docs/performance.md).

use bytes::{BufMut, Bytes, BytesMut};

use super::ACCOUNTS_PER_SCALE;

const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0";

pub(crate) struct AccountsEncoder {
    first: u64,
    next: u64,
    last: u64,
    bigint: bool,
    header_sent: bool,
    done: bool,
}

impl AccountsEncoder {
    /// Rows with aid in `from..=to`.
    pub(crate) fn new(from: u64, to: u64, bigint: bool) -> Self {
        AccountsEncoder {
            first: from,
            next: from,
            last: to,
            bigint,
            header_sent: false,
            done: false,
        }
    }

    /// The next piece of the COPY stream, about `target` bytes; `None` after the trailer.
    /// Rows encoded so far.
    pub(crate) fn rows_encoded(&self) -> u64 {
        self.next - self.first
    }

    pub(crate) fn next_chunk(&mut self, target: usize) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut b = BytesMut::with_capacity(target + 64);
        if !self.header_sent {
            b.put_slice(HEADER);
            b.put_u32(0); // flags
            b.put_u32(0); // header extension length
            self.header_sent = true;
        }
        while b.len() < target && self.next <= self.last {
            let aid = self.next;
            let bid = (aid - 1) / ACCOUNTS_PER_SCALE + 1;
            b.put_i16(2);
            if self.bigint {
                b.put_i32(8);
                b.put_i64(aid as i64);
            } else {
                b.put_i32(4);
                b.put_i32(aid as i32);
            }
            b.put_i32(4);
            b.put_i32(bid as i32);
            self.next += 1;
        }
        if self.next > self.last {
            b.put_i16(-1);
            self.done = true;
        }
        Some(b.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_has_header_rows_and_trailer() {
        let mut e = AccountsEncoder::new(1, 3, false);
        let mut all = Vec::new();
        while let Some(c) = e.next_chunk(16) {
            all.extend_from_slice(&c);
        }
        assert!(all.starts_with(HEADER));
        // header 19 bytes, 3 rows × (2 + 2 × 8), trailer 2
        assert_eq!(all.len(), 19 + 3 * 18 + 2);
        assert_eq!(&all[all.len() - 2..], &[0xff, 0xff]);
        // first row: 2 fields, aid 1, bid 1
        assert_eq!(&all[19..21], &[0, 2]);
        assert_eq!(&all[25..29], &[0, 0, 0, 1]);
        assert_eq!(&all[33..37], &[0, 0, 0, 1]);
    }

    #[test]
    fn bid_follows_aid() {
        let mut e = AccountsEncoder::new(100_000, 100_001, true);
        let c = e.next_chunk(1 << 10).expect("chunk");
        // row 1 starts at 19: count(2) len(4) aid(8) len(4) bid(4)
        assert_eq!(&c[37..41], &[0, 0, 0, 1]);
        let row2 = 19 + 2 + 12 + 8;
        assert_eq!(&c[row2 + 18..row2 + 22], &[0, 0, 0, 2]);
    }
}
