//! The archive's compact, lossless encoding of a raw step log:
//! `engine_step_raw.<pid>.jsonl.cols` with the magic `CTAXNUM1` (DESIGN.md §2.7).
//!
//! A step record is a fixed set of keys whose values are numbers that change a little from one
//! step to the next (`t_ns`, `step_id`, durations in µs with three decimals). zstd on the text
//! sees digits; number columns see values. Each line becomes a **template** (its text with every
//! number replaced by one marker byte: `0x01` for an integer, `0x01 + k` for a decimal with `k`
//! fraction digits, 1 ≤ k ≤ 8, so that no marker is `\n`) and its numbers, scaled to integers
//! (`244130.580` → 244130580, marker `0x04`). Each number is stored as its difference from the
//! number in the same place of the previous line with the same template, as little-endian i64
//! in 8 byte planes per place; place p holds only the lines whose template has a p-th number.
//!
//! Layout: the magic `CTAXNUM1`, six little-endian u64 (lines, bytes of the original JSONL,
//! flags — bit 0: the last line has no newline, a writer killed mid-line — and the compressed
//! sizes of three sections), then three checksummed zstd frames: the
//! distinct templates (in order of first use, each ended by `\n`), each line's template index
//! (LEB128), and the deltas (place 0 of every line that has one, in line order, as 8 byte
//! planes; then place 1; …).
//!
//! A number is a maximal run `-?[0-9]+(\.[0-9]+)?` whose text is exactly how its value is
//! written back (`-` if negative, the integer part without a leading zero, `.` and the fraction
//! zero-padded to k digits; no `-0`, at most 18 digits, at most 8 decimals); any other run of
//! digits stays in the template as text.
//!
//! The decoder's work and memory are bounded by the header's size of the original (at most
//! [`MAX_RAW`]): every line writes at least its template's bytes and a newline, so the lines ×
//! numbers it walks never pass that size, and it stops as soon as its output does. A line with
//! a byte below 0x20 (never in JSON text) is refused. Like request columns, [`encode`] decodes
//! its own output and returns an error unless that gives back the input byte for byte.

use anyhow::ensure;

use crate::columns::{self, MAX_RAW};

/// The first 8 bytes of a number-columns file.
pub const MAGIC: &[u8; 8] = b"CTAXNUM1";
/// Flag bit 0: the last line has no newline.
const CUT: u64 = 1;
/// Decimals a number may have to be a column (markers 0x02–0x09; 0x0A is the newline).
const MAX_DECIMALS: usize = 8;
const INT: u8 = 0x01;

/// The number starting at `b[0]` (a digit or `-`): (scaled value, marker, length), or `None`
/// if it is not written the way its value would be written back (then it stays text), with
/// the length of the run either way.
fn number(b: &[u8]) -> (Option<(i64, u8)>, usize) {
    let neg = b[0] == b'-';
    let s = usize::from(neg);
    let int = b[s..].iter().take_while(|c| c.is_ascii_digit()).count();
    if int == 0 {
        return (None, 1);
    }
    let mut len = s + int;
    let mut frac = 0;
    if b.get(len) == Some(&b'.') {
        frac = b[len + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if frac > 0 {
            len += 1 + frac;
        }
    }
    let text = &b[..len];
    let canonical = (int == 1 || b[s] != b'0') && int + frac <= 18 && frac <= MAX_DECIMALS;
    if !canonical {
        return (None, len);
    }
    let mut v: i64 = 0;
    for &c in text[s..].iter().filter(|c| c.is_ascii_digit()) {
        v = v * 10 + i64::from(c - b'0');
    }
    if neg {
        if v == 0 {
            return (None, len);
        }
        v = -v;
    }
    let marker = if frac == 0 { INT } else { INT + frac as u8 };
    (Some((v, marker)), len)
}

/// Writes `v` scaled by 10^-`k` the way [`number`] read it.
fn write_number(v: i64, marker: u8, out: &mut Vec<u8>) {
    if v < 0 {
        out.push(b'-');
    }
    let a = v.unsigned_abs();
    let k = u32::from(marker - INT);
    if k == 0 {
        out.extend_from_slice(itoa::Buffer::new().format(a).as_bytes());
        return;
    }
    let p = 10u64.pow(k);
    out.extend_from_slice(itoa::Buffer::new().format(a / p).as_bytes());
    out.push(b'.');
    let f = itoa::Buffer::new().format(a % p).to_owned();
    out.extend(std::iter::repeat_n(b'0', k as usize - f.len()));
    out.extend_from_slice(f.as_bytes());
}

/// Encodes a JSONL file's bytes; an error (naming the line) where the encoding would not give
/// back exactly `raw`.
pub fn encode(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    ensure!(raw.len() as u64 <= MAX_RAW, "larger than {MAX_RAW} bytes");
    let flags = if raw.is_empty() || raw.ends_with(b"\n") {
        0
    } else {
        CUT
    };
    let mut templates: Vec<Vec<u8>> = Vec::new();
    let mut index: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    let mut ids = Vec::new();
    // Per place: the deltas; per (template, place): the previous value.
    let mut places: Vec<Vec<u64>> = Vec::new();
    let mut prev: Vec<Vec<i64>> = Vec::new();
    let mut lines = 0u64;
    let mut t = Vec::new();
    let mut nums = Vec::new();
    for (k, line) in raw.split_inclusive(|&c| c == b'\n').enumerate() {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        t.clear();
        nums.clear();
        let mut i = 0;
        while i < line.len() {
            let c = line[i];
            ensure!(c >= 0x20, "line {}: a control byte ({c:#04x})", k + 1);
            if c == b'-' || c.is_ascii_digit() {
                let (n, len) = number(&line[i..]);
                match n {
                    Some((v, marker)) => {
                        t.push(marker);
                        nums.push(v);
                    }
                    None => t.extend_from_slice(&line[i..i + len]),
                }
                i += len;
            } else {
                t.push(c);
                i += 1;
            }
        }
        let id = *index.entry(t.clone()).or_insert_with(|| {
            templates.push(t.clone());
            prev.push(vec![0; nums.len()]);
            templates.len() - 1
        });
        columns::leb128(id as u64, &mut ids);
        if places.len() < nums.len() {
            places.resize_with(nums.len(), Vec::new);
        }
        for (p, &v) in nums.iter().enumerate() {
            places[p].push(v.wrapping_sub(prev[id][p]) as u64);
            prev[id][p] = v;
        }
        lines += 1;
    }
    let mut heads = Vec::new();
    for t in &templates {
        heads.extend_from_slice(t);
        heads.push(b'\n');
    }
    let mut planes = Vec::with_capacity(8 * places.iter().map(Vec::len).sum::<usize>());
    for col in &places {
        columns::planes(col, &mut planes);
    }
    columns::pack_verified(
        MAGIC,
        [lines, raw.len() as u64, flags],
        [&heads, &ids, &planes],
        raw,
    )
}

/// The original JSONL bytes of a number-columns file; an error saying what is damaged.
pub fn decode(b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let columns::Unpacked {
        fields: [lines, raw_len, flags],
        sections: [heads_z, ids_z, planes_z],
    } = columns::unpack(b, MAGIC, "number-columns")?;
    ensure!(flags & !CUT == 0, "unknown flags {flags:#x}");
    ensure!(
        raw_len <= MAX_RAW && lines <= raw_len,
        "the header's sizes are not plausible ({raw_len} bytes, {lines} lines)"
    );
    // A template is at most its line; each ends with a newline, a cut last line's too.
    let heads = columns::unzstd(heads_z, raw_len + 1, "templates")?;
    // An index below 2^35 takes at most 5 LEB128 bytes.
    let ids = columns::unzstd(ids_z, 5 * lines, "template indices")?;
    ensure!(
        lines <= ids.len() as u64,
        "{lines} lines but {} bytes of template indices",
        ids.len()
    );
    let templates: Vec<&[u8]> = heads
        .split_inclusive(|&c| c == b'\n')
        .map(|t| t.strip_suffix(b"\n").unwrap_or(t))
        .collect();
    // Pass 1: each line's template, and how many lines have a number at each place. Each line
    // writes at least its template's bytes and a newline: their sum bounds the work.
    let mut line_ids: Vec<u32> = Vec::with_capacity(lines as usize);
    let mut least = 0u64;
    let mut c = 0;
    let counts: Vec<usize> = templates
        .iter()
        .map(|t| t.iter().filter(|&&x| x < 0x20).count())
        .collect();
    let mut per_place: Vec<usize> = Vec::new();
    for k in 0..lines {
        let id = columns::read_leb128(&ids, &mut c, "template indices")? as usize;
        ensure!(
            id < templates.len(),
            "line {}: template {id} of {}",
            k + 1,
            templates.len()
        );
        least += templates[id].len() as u64 + 1;
        ensure!(
            least <= raw_len + 1,
            "line {}: the lines decode to more than the header's {raw_len} bytes",
            k + 1
        );
        if per_place.len() < counts[id] {
            per_place.resize(counts[id], 0);
        }
        for n in &mut per_place[..counts[id]] {
            *n += 1;
        }
        line_ids.push(id as u32);
    }
    ensure!(
        c == ids.len(),
        "the template indices hold more than {lines} lines"
    );
    let total: usize = per_place.iter().sum();
    // `least` bounds `total` (each number is at least one byte of its line).
    let planes = columns::unzstd(planes_z, 8 * total as u64, "numbers")?;
    ensure!(
        planes.len() == 8 * total,
        "the numbers hold {} bytes, not 8 × {total}",
        planes.len()
    );
    // Where each place's planes start, and how far each has been read.
    let mut start = Vec::with_capacity(per_place.len());
    let mut s = 0;
    for &n in &per_place {
        start.push(s);
        s += 8 * n;
    }
    let mut read = vec![0usize; per_place.len()];
    let mut prev: Vec<Vec<i64>> = counts.iter().map(|&n| vec![0; n]).collect();
    let mut out = Vec::with_capacity(heads.len() + planes.len());
    // Checked as it writes: a hostile header cannot make the output grow past its size (and
    // the newline a cut last line gives back at the end).
    let too_long = |out: &Vec<u8>| {
        ensure!(
            out.len() as u64 <= raw_len + 1,
            "the sections decode to more than the header's {raw_len} bytes"
        );
        Ok(())
    };
    for &id in &line_ids {
        let id = id as usize;
        let mut p = 0;
        for &x in templates[id] {
            if x >= 0x20 {
                out.push(x);
                continue;
            }
            ensure!(
                (INT..=INT + MAX_DECIMALS as u8).contains(&x),
                "template {id}: byte {x:#04x}"
            );
            let (n, i) = (per_place[p], read[p]);
            let d = columns::plane_value(&planes[start[p]..], n, i) as i64;
            read[p] += 1;
            let v = prev[id][p].wrapping_add(d);
            prev[id][p] = v;
            write_number(v, x, &mut out);
            too_long(&out)?;
            p += 1;
        }
        out.push(b'\n');
        too_long(&out)?;
    }
    if flags & CUT != 0 {
        ensure!(lines > 0, "a cut last line in a file without lines");
        out.pop();
    }
    ensure!(
        out.len() as u64 == raw_len,
        "the sections disagree with the header ({} of {raw_len} bytes)",
        out.len()
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::HEADER;

    /// Three lines of a real raw step log (vLLM 0.26, H200 archive, plain l1), as the step
    /// plugin writes them.
    fn sample() -> Vec<u8> {
        br#"{"t_ns":335041635606,"step_id":0,"pid":1897,"step_duration_us":244130.580,"schedule_us":763.155,"build_meta_us":null,"get_finished_us":null,"start_load_kv_us":null,"num_running":1,"num_waiting":0,"prefill_tokens":4096,"decode_tokens":0}
{"t_ns":335281685643,"step_id":1,"pid":1897,"step_duration_us":7772.117,"schedule_us":229.986,"build_meta_us":null,"get_finished_us":null,"start_load_kv_us":null,"num_running":1,"num_waiting":0,"prefill_tokens":0,"decode_tokens":1}
{"t_ns":335286131037,"step_id":2,"pid":1897,"step_duration_us":7560.991,"schedule_us":115.039,"build_meta_us":null,"get_finished_us":null,"start_load_kv_us":null,"num_running":1,"num_waiting":0,"prefill_tokens":0,"decode_tokens":1}
"#
        .to_vec()
    }

    fn sections(enc: &[u8]) -> [Vec<u8>; 3] {
        let u = |i: usize| u64::from_le_bytes(enc[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        let mut at = HEADER;
        std::array::from_fn(|i| {
            let len = u(3 + i) as usize;
            let s = zstd::decode_all(&enc[at..at + len]).unwrap();
            at += len;
            s
        })
    }

    #[test]
    fn a_step_log_decodes_to_its_own_bytes_and_the_layout_is_as_documented() {
        let raw = sample();
        let enc = encode(&raw).unwrap();
        assert_eq!(decode(&enc).unwrap(), raw);
        assert!(enc.starts_with(MAGIC));
        let [heads, ids, planes] = sections(&enc);
        // One template: every number a marker (0x01 integers, 0x04 three decimals), null kept.
        let t = String::from_utf8(heads).unwrap();
        assert_eq!(t.lines().count(), 1, "{t:?}");
        assert!(
            t.starts_with(
                "{\"t_ns\":\u{1},\"step_id\":\u{1},\"pid\":\u{1},\"step_duration_us\":\u{4},"
            ),
            "{t:?}"
        );
        assert!(t.contains("\"build_meta_us\":null,"), "{t:?}");
        assert_eq!(ids, vec![0, 0, 0]);
        // 9 places × 3 lines × 8 bytes. Place 0 (t_ns) by hand: 335041635606, then
        // 335281685643 − 335041635606 = 240050037, then 4445394; place 3 (step_duration_us
        // in ns): 244130580, then 7772117 − 244130580 = −236358463.
        assert_eq!(planes.len(), 9 * 3 * 8);
        let delta = |place: usize, line: usize| {
            i64::from_le_bytes(std::array::from_fn(|b| planes[place * 24 + b * 3 + line]))
        };
        assert_eq!(
            [delta(0, 0), delta(0, 1), delta(0, 2)],
            [335041635606, 240050037, 4445394]
        );
        assert_eq!([delta(3, 0), delta(3, 1)], [244130580, -236358463]);
        assert_eq!(
            [delta(1, 1), delta(2, 1)],
            [1, 0],
            "step_id +1, pid unchanged"
        );
    }

    /// Runs of digits that would not be written back the same stay text, in the template; a
    /// number's place is its position in the line, each template keeps its own previous values.
    #[test]
    fn numbers_not_written_canonically_stay_text_and_every_line_round_trips() {
        let raw = b"{\"a\":007,\"b\":-0,\"c\":1e-05,\"d\":1.5E+3,\"e\":12345678901234567890}\n\
{\"a\":-0.5,\"b\":0.050,\"c\":-12,\"d\":5.,\"e\":1.1234567891}\n\
{\"id\":\"run 42\",\"x\":[1,2,-3]}\n{\"a\":-0.7,\"b\":0.051,\"c\":-13,\"d\":6.,\"e\":1.1234567891}\n\
[]\n\n";
        let enc = encode(raw).unwrap();
        assert_eq!(decode(&enc).unwrap(), raw);
        let [heads, ids, _] = sections(&enc);
        let t = String::from_utf8(heads).unwrap();
        // 007, -0, -05, 12345678901234567890 (20 digits) and 1.1234567891 (10 decimals) text.
        assert!(
            t.contains(
                "\"a\":007,\"b\":-0,\"c\":\u{1}e-05,\"d\":\u{2}E+\u{1},\"e\":12345678901234567890}"
            ),
            "{t:?}"
        );
        assert!(t.contains("\"e\":1.1234567891}"), "{t:?}");
        assert!(
            t.contains("{\"id\":\"run \u{1}\",\"x\":[\u{1},\u{1},\u{1}]}"),
            "{t:?}"
        );
        // Lines 2 and 4 share a template; [] and the empty line have their own.
        assert_eq!(ids, vec![0, 1, 2, 1, 3, 4]);
        assert_eq!(decode(&encode(b"").unwrap()).unwrap(), b"");
    }

    /// 8 decimals are a column (marker 0x09); 9 stay text (their marker would be 0x0A, the
    /// newline that ends a template: from a review, a 9-decimal log was refused on every pass).
    #[test]
    fn eight_decimals_are_a_column_nine_stay_text() {
        let raw = b"{\"x\":0.12345678,\"y\":0.123456789}\n{\"x\":0.22345678,\"y\":0.123456789}\n";
        let enc = encode(raw).unwrap();
        assert_eq!(decode(&enc).unwrap(), raw);
        let [heads, ids, planes] = sections(&enc);
        assert_eq!(heads, b"{\"x\":\x09,\"y\":0.123456789}\n");
        assert_eq!(ids, vec![0, 0]);
        // 12345678, then 22345678 − 12345678 = 10000000.
        let d = |line: usize| i64::from_le_bytes(std::array::from_fn(|b| planes[b * 2 + line]));
        assert_eq!([d(0), d(1)], [12_345_678, 10_000_000]);
    }

    /// A header announcing fewer bytes than its lines write stops the decoder in its first pass
    /// (from a review: a 2.7 KB file of 2^26 lines × 2^24 numbers would have run for days).
    #[test]
    fn a_header_smaller_than_its_lines_stops_the_first_pass() {
        let raw: Vec<u8> = sample().repeat(400);
        let enc = encode(&raw).unwrap();
        let mut small = enc.clone();
        small[16..24].copy_from_slice(&1_500u64.to_le_bytes());
        let e = decode(&small).unwrap_err().to_string();
        assert!(
            e.contains("the lines decode to more than the header's 1500 bytes"),
            "{e}"
        );
    }

    /// A last line without its newline (a writer killed mid-line) is kept, flagged.
    #[test]
    fn a_cut_last_line_round_trips() {
        let raw = sample();
        for cut in [&raw[..raw.len() - 1], &raw[..raw.len() - 30], &raw[..7]] {
            let enc = encode(cut).unwrap();
            assert_eq!(u64::from_le_bytes(enc[24..32].try_into().unwrap()), CUT);
            assert_eq!(decode(&enc).unwrap(), cut);
        }
        let whole = encode(&raw).unwrap();
        assert_eq!(u64::from_le_bytes(whole[24..32].try_into().unwrap()), 0);
    }

    #[test]
    fn a_control_byte_is_refused_with_its_line() {
        let e = encode(b"{}\n{\"a\":\"\x01\"}\n").unwrap_err().to_string();
        assert!(e.contains("line 2: a control byte (0x01)"), "{e}");
    }

    /// Every single-byte change of a file (three values at every offset) is an error or gives
    /// back exactly the original: never other bytes, never a panic.
    #[test]
    fn no_single_byte_change_decodes_to_other_bytes() {
        let raw = sample();
        let enc = encode(&raw).unwrap();
        let mut errors = 0;
        for i in 0..enc.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = enc.clone();
                b[i] ^= x;
                match decode(&b) {
                    Ok(out) => assert_eq!(out, raw, "byte {i} ^ {x:#x} decoded to other bytes"),
                    Err(_) => errors += 1,
                }
            }
        }
        assert!(errors > 2 * enc.len(), "{errors} errors");
        let e = decode(&enc[..enc.len() - 1]).unwrap_err().to_string();
        assert!(e.contains("do not add up"), "{e}");
    }
}
