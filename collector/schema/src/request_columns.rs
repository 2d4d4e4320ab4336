//! The archive's compact, lossless encoding of a request file:
//! `requests_<phase>_<cell>.jsonl.cols` (DESIGN.md §2.7).
//!
//! A request record is ~90% event times (one `[t_ns, tokens]` pair per streamed chunk), and
//! those are nanoseconds read off a monotonic clock whose last ~10 bits are jitter: zstd on the
//! JSONL text spends ~27 bits per event on them. Columns spend ~20: each record's `events` array
//! is taken out of its line (leaving the number of events in its place) and stored as
//! - **deltas**: every event time minus the previous event's in the same record (the first
//!   minus the record's `t_first_token_ns`, else `t_send_ns`, else 0), as little-endian i64
//!   split into 8 byte planes (byte 0 of every delta, then byte 1, …), so the near-constant
//!   high bytes form long runs;
//! - **counts**: every event's token count, LEB128.
//!
//! Layout: the magic `CTAXCOL1`, then six little-endian u64 (lines, events, bytes of the
//! original JSONL, and the compressed sizes of the three sections), then three checksummed
//! zstd frames: the lines without their events (JSONL), the byte planes, the counts. A last
//! line without a newline (a writer killed mid-line) is kept as it is, events and all.
//!
//! **Lossless by construction and by check**: [`encode`] decodes what it produced and returns
//! an error unless that gives back the input byte for byte, so a line the encoding cannot
//! reproduce (an `events` value not in the collector's compact form, a second `"events":` key)
//! leaves the file as it is. [`decode`] gives back the original JSONL; every
//! reader of raw files in the main crate goes through it (`ingest::jsonl::decoded`), so a `.cols` file reads exactly as
//! the `.jsonl.zst` it replaced. `ctax cat FILE` prints it.

use anyhow::{Context, bail, ensure};

use crate::columns::{self, MAX_RAW};

/// The first 8 bytes of a request-columns file (the format's version is its last byte).
pub const MAGIC: &[u8; 8] = b"CTAXCOL1";
/// The key whose value is taken out of each line.
const KEY: &[u8] = b"\"events\":";

/// Where `"events":` starts in `line`; an error if it is missing or there twice.
fn key_at(line: &[u8]) -> anyhow::Result<usize> {
    let mut it = memchr::memmem::find_iter(line, KEY);
    let Some(at) = it.next() else {
        bail!("no \"events\" key");
    };
    ensure!(it.next().is_none(), "\"events\" twice");
    Ok(at)
}

/// An unsigned decimal at the start of `b` (no sign, no leading zero unless it is `0`): its
/// value and length.
fn number(b: &[u8]) -> Option<(u64, usize)> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || (n > 1 && b[0] == b'0') {
        return None;
    }
    std::str::from_utf8(&b[..n])
        .ok()?
        .parse()
        .ok()
        .map(|v| (v, n))
}

/// Parses the compact array `[[t,c],[t,c],…]` (or `[]`) at the start of `b`: the events and
/// the array's length in bytes.
fn events_array(b: &[u8]) -> Option<(Vec<(u64, u64)>, usize)> {
    let mut ev = Vec::new();
    let mut i = 1;
    if *b.first()? != b'[' {
        return None;
    }
    if b.get(1) == Some(&b']') {
        return Some((ev, 2));
    }
    loop {
        if b.get(i) != Some(&b'[') {
            return None;
        }
        let (t, n) = number(&b[i + 1..])?;
        i += 1 + n;
        if b.get(i) != Some(&b',') {
            return None;
        }
        let (c, n) = number(&b[i + 1..])?;
        i += 1 + n;
        if b.get(i) != Some(&b']') {
            return None;
        }
        ev.push((t, c));
        i += 1;
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b']') => return Some((ev, i + 1)),
            _ => return None,
        }
    }
}

/// The time the first event's delta is taken from: `t_first_token_ns`, else `t_send_ns`, else 0.
fn base(head: &[u8]) -> anyhow::Result<u64> {
    #[derive(serde::Deserialize)]
    struct Times {
        t_send_ns: Option<u64>,
        t_first_token_ns: Option<u64>,
    }
    let t: Times = serde_json::from_slice(head).context("not a JSON record")?;
    Ok(t.t_first_token_ns.or(t.t_send_ns).unwrap_or(0))
}

/// Encodes a request file's JSONL bytes; an error (naming the line) where the encoding would
/// not give back exactly `raw`.
pub fn encode(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    ensure!(raw.len() as u64 <= MAX_RAW, "larger than {MAX_RAW} bytes");
    let mut heads = Vec::with_capacity(raw.len() / 8);
    let mut deltas: Vec<u64> = Vec::new();
    let mut counts = Vec::new();
    let mut lines = 0u64;
    for (k, line) in raw.split_inclusive(|&c| c == b'\n').enumerate() {
        if !line.ends_with(b"\n") {
            // The last line, cut: kept as it is (the decoder copies a line without a newline).
            heads.extend_from_slice(line);
            lines += 1;
            continue;
        }
        let at = (|| {
            let line = &line[..line.len() - 1];
            let v = key_at(line)? + KEY.len();
            if line[v..].starts_with(b"null") {
                heads.extend_from_slice(line);
            } else {
                let Some((ev, n)) = events_array(&line[v..]) else {
                    bail!("`events` is not the collector's compact [[t,c],…] array");
                };
                let start = heads.len();
                heads.extend_from_slice(&line[..v]);
                heads.extend_from_slice(ev.len().to_string().as_bytes());
                heads.extend_from_slice(&line[v + n..]);
                let mut prev = base(&heads[start..])?;
                for (t, c) in ev {
                    ensure!(c <= u64::from(u32::MAX), "a token count above 2^32");
                    deltas.push(t.wrapping_sub(prev));
                    prev = t;
                    columns::leb128(c, &mut counts);
                }
            }
            heads.push(b'\n');
            Ok(())
        })();
        at.with_context(|| format!("line {}", k + 1))?;
        lines += 1;
    }
    let n = deltas.len();
    let mut planes = Vec::with_capacity(8 * n);
    columns::planes(&deltas, &mut planes);
    columns::pack_verified(
        MAGIC,
        [lines, n as u64, raw.len() as u64],
        [&heads, &planes, &counts],
        raw,
    )
}

/// The original JSONL bytes of a `.cols` file; an error saying what is damaged.
pub fn decode(b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let columns::Unpacked {
        fields: [lines, n, raw_len],
        sections: [heads_z, planes_z, counts_z],
    } = columns::unpack(b, MAGIC, "request-columns")?;
    ensure!(
        raw_len <= MAX_RAW && n <= raw_len / 5,
        "the header's sizes are not plausible ({raw_len} bytes, {n} events)"
    );
    let heads = columns::unzstd(heads_z, raw_len, "lines")?;
    let planes = columns::unzstd(planes_z, 8 * n, "event times")?;
    let counts = columns::unzstd(counts_z, 5 * n, "token counts")?;
    ensure!(
        planes.len() as u64 == 8 * n,
        "the event times hold {} bytes, not 8 × {n}",
        planes.len()
    );
    let n = n as usize;
    let delta = |i: usize| columns::plane_value(&planes, n, i);
    // Never more than the header's size: a hostile header cannot make the output grow past it.
    let mut out = Vec::with_capacity((raw_len as usize).min(heads.len() + 4 * planes.len()));
    let too_long = |out: &Vec<u8>| {
        ensure!(
            out.len() as u64 <= raw_len,
            "the sections decode to more than the header's {raw_len} bytes"
        );
        Ok(())
    };
    let (mut e, mut c, mut k) = (0usize, 0usize, 0u64);
    let mut cut = false;
    for head in heads.split_inclusive(|&c| c == b'\n') {
        k += 1;
        ensure!(!cut, "line {k}: after a line without a newline");
        let Some(body) = head.strip_suffix(b"\n") else {
            // A cut last line, kept as it was.
            out.extend_from_slice(head);
            cut = true;
            continue;
        };
        let fail = |why: String| anyhow::anyhow!("line {k}: {why}");
        let v = key_at(body).map_err(|e| fail(e.to_string()))? + KEY.len();
        let Some((m, len)) = number(&body[v..]) else {
            ensure!(
                body[v..].starts_with(b"null"),
                "line {k}: `events` holds neither a count nor null"
            );
            out.extend_from_slice(head);
            continue;
        };
        ensure!(
            (e as u64).checked_add(m).is_some_and(|end| end <= n as u64),
            "line {k}: more events than the file holds"
        );
        out.extend_from_slice(&body[..v]);
        out.push(b'[');
        let mut prev = base(head).map_err(|err| fail(format!("{err:#}")))?;
        for j in 0..m {
            let t = prev.wrapping_add(delta(e));
            let tokens = columns::read_leb128(&counts, &mut c, "token counts")?;
            ensure!(
                tokens <= u64::from(u32::MAX),
                "line {k}: a token count above 2^32"
            );
            if j > 0 {
                out.push(b',');
            }
            out.push(b'[');
            out.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
            out.push(b',');
            out.extend_from_slice(itoa::Buffer::new().format(tokens).as_bytes());
            out.push(b']');
            prev = t;
            e += 1;
            too_long(&out)?;
        }
        out.push(b']');
        out.extend_from_slice(&body[v + len..]);
        out.push(b'\n');
        too_long(&out)?;
    }
    ensure!(
        k == lines && e == n && c == counts.len() && out.len() as u64 == raw_len,
        "the sections disagree with the header ({k} of {lines} lines, {e} of {n} events, {} of \
         {} count bytes, {} of {raw_len} bytes)",
        c,
        counts.len(),
        out.len()
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::HEADER;

    /// Two records as the collector writes them (compact JSON, keys in the schema's order), a
    /// dropped one with `events: null`-like empty list, and one with a 3-token event.
    fn sample() -> Vec<u8> {
        let mut s = String::new();
        s.push_str(
            r#"{"request_id":"plain/l0/A/r4_i8_o8/0","t_send_ns":1000,"t_first_token_ns":5000,"events":[[5000,1],[9100,4],[13000,1]],"completion_tokens":6,"error":null}"#,
        );
        s.push('\n');
        s.push_str(
            r#"{"request_id":"plain/l0/A/r4_i8_o8/1","t_send_ns":null,"t_first_token_ns":null,"events":[],"completion_tokens":null,"error":"dropped: \"events\" not sent"}"#,
        );
        s.push('\n');
        s.push_str(
            r#"{"request_id":"plain/l0/A/r4_i8_o8/2","t_send_ns":2000,"t_first_token_ns":null,"events":[[1999,300]],"completion_tokens":300,"error":null}"#,
        );
        s.push('\n');
        s.into_bytes()
    }

    #[test]
    fn a_file_decodes_to_its_own_bytes_and_the_layout_is_as_documented() {
        let raw = sample();
        let enc = encode(&raw).unwrap();
        assert_eq!(decode(&enc).unwrap(), raw);
        assert!(enc.starts_with(MAGIC));
        let u = |i: usize| u64::from_le_bytes(enc[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        // 3 lines, 4 events, the original's length, sections adding up to the file.
        assert_eq!((u(0), u(1), u(2)), (3, 4, raw.len() as u64));
        assert_eq!(HEADER as u64 + u(3) + u(4) + u(5), enc.len() as u64);
        // The lines without their events hold the counts: 3, 0 and 1.
        let at = HEADER;
        let heads = zstd::decode_all(&enc[at..at + u(3) as usize]).unwrap();
        let heads = String::from_utf8(heads).unwrap();
        assert!(heads.contains(r#""events":3,"#), "{heads}");
        assert!(heads.contains(r#""events":0,"#), "{heads}");
        assert!(heads.contains(r#""events":1,"#), "{heads}");
        // Deltas by hand: 5000−5000 = 0, 9100−5000 = 4100, 13000−9100 = 3900 (base
        // t_first_token_ns), and 1999−2000 = −1 (base t_send_ns; wraps to u64::MAX).
        let planes = zstd::decode_all(&enc[at + u(3) as usize..][..u(4) as usize]).unwrap();
        let d: Vec<u64> = (0..4)
            .map(|i| u64::from_le_bytes(std::array::from_fn(|p| planes[p * 4 + i])))
            .collect();
        assert_eq!(d, vec![0, 4100, 3900, u64::MAX]);
        // Counts in LEB128: 1, 4, 1, 300 = 0xAC 0x02.
        let counts = zstd::decode_all(&enc[at + (u(3) + u(4)) as usize..]).unwrap();
        assert_eq!(counts, vec![1, 4, 1, 0xac, 0x02]);
    }

    #[test]
    fn what_the_encoding_cannot_reproduce_is_refused_with_its_line() {
        let ok = sample();
        let cases: [(&[u8], &str); 5] = [
            (
                b"{\"events\":[[1,1]],\"x\":{\"events\":[]}}\n",
                "line 1: \"events\" twice",
            ),
            (b"{\"a\":1}\n", "line 1: no \"events\" key"),
            (b"{\"events\":[[01,1]]}\n", "line 1: `events` is not"),
            (b"{\"events\":[[1, 1]]}\n", "line 1: `events` is not"),
            (
                b"{\"events\":[],\"t_send_ns\":1}\n{\"events\":[[1,1]]\n",
                "line 2: ",
            ),
        ];
        for (raw, want) in cases {
            let e = format!("{:#}", encode(raw).unwrap_err());
            assert!(e.contains(want), "{e} (wanted {want})");
        }
        // A count beyond u32 and a time beyond u64 are not the collector's records either.
        assert!(encode(b"{\"events\":[[1,4294967296]]}\n").is_err());
        assert!(encode(b"{\"events\":[[18446744073709551616,1]]}\n").is_err());
        // An empty file is one with no lines.
        assert_eq!(decode(&encode(b"").unwrap()).unwrap(), b"");
        // A last line without its newline (cut mid-events, or only its newline lost) is kept
        // as it is, its events not taken out.
        for cut in [&ok[..ok.len() - 1], &ok[..ok.len() - 40]] {
            let enc = encode(cut).unwrap();
            assert_eq!(decode(&enc).unwrap(), cut);
        }
    }

    #[test]
    fn a_cut_or_damaged_file_is_an_error_not_a_short_read() {
        let enc = encode(&sample()).unwrap();
        let e = decode(&enc[..enc.len() - 3]).unwrap_err().to_string();
        assert!(e.contains("do not add up"), "{e}");
        let mut bad = enc.clone();
        let last = bad.len() - 6;
        bad[last] ^= 0xff;
        assert!(decode(&bad).is_err());
        let mut bad = enc.clone();
        bad[8] += 1; // one line more than the sections hold
        let e = decode(&bad).unwrap_err().to_string();
        assert!(e.contains("disagree with the header"), "{e}");
        assert!(decode(b"{\"events\":[]}\n").is_err());
        // A header announcing fewer bytes than the sections hold stops the decoder as soon as
        // it passes them (from a review: a 4 KB file claiming 20 MB wrote 176 MB first).
        let heads_zlen = u64::from_le_bytes(enc[32..40].try_into().unwrap()) as usize;
        let heads = zstd::decode_all(&enc[HEADER..HEADER + heads_zlen]).unwrap();
        let claim = heads.len() as u64 + 10;
        let mut small = enc.clone();
        small[24..32].copy_from_slice(&claim.to_le_bytes());
        let e = decode(&small).unwrap_err().to_string();
        assert!(
            e.contains(&format!("more than the header's {claim} bytes")),
            "{e}"
        );
    }

    /// Every single-byte change of a file (three values at every offset) is an error or,
    /// where the byte does not matter to the decoder (a zstd frame header's unused bits),
    /// gives back exactly the original: never other records, never a panic.
    #[test]
    fn no_single_byte_change_decodes_to_other_bytes() {
        let raw = sample();
        let enc = encode(&raw).unwrap();
        let (mut errors, mut same) = (0, 0);
        for i in 0..enc.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = enc.clone();
                b[i] ^= x;
                match decode(&b) {
                    Ok(out) => {
                        assert_eq!(out, raw, "byte {i} ^ {x:#x} decoded to other bytes");
                        same += 1;
                    }
                    Err(_) => errors += 1,
                }
            }
        }
        assert!(errors > 2 * enc.len(), "{errors} errors, {same} unchanged");
    }

    #[test]
    fn real_collector_records_round_trip() {
        use crate::{Event, Phase, RequestRecord, Status};
        let rec = |seq: u64, events: Vec<Event>, status: Status| RequestRecord {
            request_id: format!("plain/l0/A/r4_i8_o8/{seq}"),
            config: "plain".into(),
            launch: 0,
            phase: Phase::A,
            cell: "r4_i8_o8".into(),
            rate: 4.0,
            input_len: 8,
            output_len: 8,
            seq,
            t_intended_ns: 408_899_570_783 + seq,
            t_send_ns: Some(408_899_670_478 + seq),
            t_first_token_ns: events.first().map(|e| e.0),
            t_last_token_ns: events.last().map(|e| e.0),
            t_end_ns: Some(412_131_019_014),
            events,
            prompt_tokens: Some(8),
            completion_tokens: Some(8),
            inflight_at_send: 3,
            warmup: seq == 0,
            status,
            http_status: Some(200),
            error: None,
        };
        let mut raw = Vec::new();
        for (seq, ev) in [
            vec![
                Event(409_038_858_911, 1),
                Event(409_039_727_985, 4),
                Event(409_042_793_627, 3),
            ],
            vec![],
            vec![Event(u64::MAX, u32::MAX)],
        ]
        .into_iter()
        .enumerate()
        {
            let st = if ev.is_empty() {
                Status::Dropped
            } else {
                Status::Ok
            };
            serde_json::to_writer(&mut raw, &rec(seq as u64, ev, st)).unwrap();
            raw.push(b'\n');
        }
        let enc = encode(&raw).unwrap();
        assert_eq!(decode(&enc).unwrap(), raw);
        let back: Vec<RequestRecord> = String::from_utf8(decode(&enc).unwrap())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back[0].events[1], Event(409_039_727_985, 4));
        assert_eq!(back[2].events, vec![Event(u64::MAX, u32::MAX)]);
    }
}
