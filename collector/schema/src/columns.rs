//! What the archive's two columns encodings share (DESIGN.md §2.7): the container — an 8-byte
//! magic, three little-endian u64 of the encoding's own, the compressed sizes of three
//! sections, then the sections as checksummed zstd-19 frames — LEB128 and byte planes; and the
//! dispatch by magic. The encodings themselves: [`crate::request_columns`] (`CTAXCOL1`,
//! request files) and [`crate::number_columns`] (`CTAXNUM1`, raw step logs).

use anyhow::{Context, bail, ensure};

/// The file suffix of both encodings, after `.jsonl`.
pub const SUFFIX: &str = ".cols";
/// A header announcing a larger original is refused before anything is decoded, a larger
/// `.cols` file is not read, and a larger original is not encoded (it stays `.zst`). The
/// largest archived original decodes to 8.6 MB; a decoder's memory stays under ~8× this, so
/// under the fuzz harness's 2 GiB.
pub const MAX_RAW: u64 = 128 << 20;
/// zstd level of the sections. Under the fuzzer (`cfg(fuzzing)`, which cargo-fuzz sets) 1: the
/// level changes only zstd's own search, not a line of this crate, and at 19 the encode mode
/// ran ~30 inputs a second (DESIGN.md §10); what decodes is the same format at any level.
const LEVEL: i32 = if cfg!(fuzzing) { 1 } else { 19 };
/// Bytes before the sections: the magic and six u64.
pub const HEADER: usize = 8 + 6 * 8;

/// The columns form of the raw file `p`, whichever stored form `p` names: `X.jsonl`,
/// `X.jsonl.zst` → `X.jsonl.cols`.
pub fn path_of(p: &std::path::Path) -> std::path::PathBuf {
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    p.with_file_name(format!("{}{SUFFIX}", crate::plain_name(&name)))
}

/// Is `head` (a file's first bytes) the start of a columns file?
pub fn is_columns(head: &[u8]) -> bool {
    head.starts_with(crate::request_columns::MAGIC)
        || head.starts_with(crate::number_columns::MAGIC)
}

/// The original bytes of a columns file, by its magic number.
pub fn decode(b: &[u8]) -> anyhow::Result<Vec<u8>> {
    if b.starts_with(crate::request_columns::MAGIC) {
        crate::request_columns::decode(b)
    } else if b.starts_with(crate::number_columns::MAGIC) {
        crate::number_columns::decode(b)
    } else {
        bail!("not a columns file (neither a CTAXCOL1 nor a CTAXNUM1 header)")
    }
}

/// Appends `v` as LEB128.
pub fn leb128(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// The LEB128 value at `b[*at]` (advancing `at`); `what` names the values in errors.
pub fn read_leb128(b: &[u8], at: &mut usize, what: &str) -> anyhow::Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&x) = b.get(*at) else {
            bail!("the {what} end early");
        };
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    bail!("one of the {what} is longer than 64 bits")
}

/// `values` as little-endian 8-byte words in 8 byte planes: byte 0 of every value, then byte 1, …
pub fn planes(values: &[u64], out: &mut Vec<u8>) {
    for b in 0..8 {
        out.extend(values.iter().map(|v| v.to_le_bytes()[b]));
    }
}

/// Value `i` of the `n` values whose byte planes start at `planes[0]`.
pub fn plane_value(planes: &[u8], n: usize, i: usize) -> u64 {
    u64::from_le_bytes(std::array::from_fn(|b| planes[b * n + i]))
}

fn zstd_frame(b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), LEVEL)?;
    e.include_checksum(true)?;
    std::io::Write::write_all(&mut e, b)?;
    Ok(e.finish()?)
}

/// The container: `magic`, `fields`, the three sections' compressed sizes, the sections.
pub fn pack(magic: &[u8; 8], fields: [u64; 3], sections: [&[u8]; 3]) -> anyhow::Result<Vec<u8>> {
    let frames = sections
        .into_iter()
        .map(zstd_frame)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut out = Vec::new();
    out.extend_from_slice(magic);
    for v in fields {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for f in &frames {
        out.extend_from_slice(&(f.len() as u64).to_le_bytes());
    }
    for f in &frames {
        out.extend_from_slice(f);
    }
    Ok(out)
}

/// [`pack`], then the encoders' self-check: the container, decoded ([`decode`], by its magic),
/// must give back `raw` byte for byte; otherwise an error naming the first line that differs.
pub fn pack_verified(
    magic: &[u8; 8],
    fields: [u64; 3],
    sections: [&[u8]; 3],
    raw: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let out = pack(magic, fields, sections)?;
    let back = decode(&out).context("decoding the new encoding")?;
    if back != raw {
        let line = first_difference_line(raw, &back);
        bail!("line {line}: the encoding does not give back the original bytes");
    }
    Ok(out)
}

/// A container read back: the encoding's three fields and its three (compressed) sections.
pub struct Unpacked<'a> {
    pub fields: [u64; 3],
    pub sections: [&'a [u8]; 3],
}

/// Splits a container, checking its magic (`name` names the encoding in errors) and that the
/// sections' sizes add up to the file.
pub fn unpack<'a>(b: &'a [u8], magic: &[u8; 8], name: &str) -> anyhow::Result<Unpacked<'a>> {
    ensure!(
        b.len() >= HEADER && b.starts_with(magic),
        "not a {name} file (no {} header)",
        String::from_utf8_lossy(magic)
    );
    let u = |i: usize| u64::from_le_bytes(b[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let lens = [u(3), u(4), u(5)];
    ensure!(
        lens.iter()
            .try_fold(HEADER as u64, |a, &l| a.checked_add(l))
            == Some(b.len() as u64),
        "the sections' sizes ({lens:?}) do not add up to the file's {} bytes (cut or damaged)",
        b.len()
    );
    let mut at = HEADER;
    let sections = lens.map(|l| {
        let s = &b[at..at + l as usize];
        at += l as usize;
        s
    });
    Ok(Unpacked {
        fields: [u(0), u(1), u(2)],
        sections,
    })
}

/// Decompresses one section, refusing more than `limit` bytes (the limit the header allows);
/// `what` names it in errors.
pub fn unzstd(b: &[u8], limit: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let d = zstd::stream::read::Decoder::new(b).with_context(|| format!("the {what} section"))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(d, limit + 1), &mut out)
        .with_context(|| format!("the {what} section is damaged"))?;
    ensure!(
        out.len() as u64 <= limit,
        "the {what} section decodes to more than the header allows ({limit} bytes)"
    );
    Ok(out)
}

/// The 1-based line of `raw` where `back` first differs from it (for the encoders' self-check).
fn first_difference_line(raw: &[u8], back: &[u8]) -> usize {
    let at = back
        .iter()
        .zip(raw)
        .position(|(a, b)| a != b)
        .unwrap_or(back.len().min(raw.len()));
    raw[..at].iter().filter(|&&c| c == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LEB128 by hand (300 = 0b10_0101100 → 0xAC 0x02) and byte planes by hand.
    #[test]
    fn leb128_and_byte_planes_by_hand() {
        let mut b = Vec::new();
        for v in [0, 127, 128, 300, u64::MAX] {
            leb128(v, &mut b);
        }
        assert_eq!(&b[..6], &[0x00, 0x7f, 0x80, 0x01, 0xac, 0x02]);
        assert_eq!(b.len(), 6 + 10);
        let mut at = 0;
        let back: Vec<u64> = (0..5)
            .map(|_| read_leb128(&b, &mut at, "x").unwrap())
            .collect();
        assert_eq!(back, [0, 127, 128, 300, u64::MAX]);
        assert!(
            read_leb128(&b, &mut at, "counts")
                .unwrap_err()
                .to_string()
                .contains("counts end early")
        );
        let mut p = Vec::new();
        planes(&[0x0102, 0x0304], &mut p);
        assert_eq!(&p[..4], &[0x02, 0x04, 0x01, 0x03]);
        assert_eq!(p.len(), 16);
        assert_eq!(
            [plane_value(&p, 2, 0), plane_value(&p, 2, 1)],
            [0x0102, 0x0304]
        );
    }

    #[test]
    fn the_columns_form_of_every_stored_form() {
        for f in ["/r/l0/x.jsonl", "/r/l0/x.jsonl.zst", "/r/l0/x.jsonl.cols"] {
            assert_eq!(
                path_of(std::path::Path::new(f)),
                std::path::Path::new("/r/l0/x.jsonl.cols")
            );
        }
    }

    #[test]
    fn a_container_splits_back_into_what_was_packed() {
        let c = pack(b"CTAXTEST", [1, 2, 3], [b"a", b"", b"ccc"]).unwrap();
        let u = unpack(&c, b"CTAXTEST", "test").unwrap();
        assert_eq!(u.fields, [1, 2, 3]);
        let got: Vec<Vec<u8>> = u
            .sections
            .iter()
            .map(|s| unzstd(s, 10, "s").unwrap())
            .collect();
        assert_eq!(got, [b"a".to_vec(), vec![], b"ccc".to_vec()]);
        assert!(
            unzstd(u.sections[2], 2, "third")
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        let e = unpack(&c[..c.len() - 1], b"CTAXTEST", "test")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("do not add up"), "{e}");
        let e = unpack(&c, b"CTAXOTHR", "other").err().unwrap().to_string();
        assert!(e.contains("not a other file"), "{e}");
    }
}
