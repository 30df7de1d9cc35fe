//! Validation of a GGUF file's layout before Candle's reader sees it.
//!
//! Candle 0.11's reader bounds string, array and count lengths by the file size, but
//! it divides by a zero `general.alignment` (a panic), lets duplicate keys and tensor
//! names overwrite each other, computes element counts that can overflow, and never
//! checks that tensors lie inside the file, stay apart, or sit at offsets their
//! block types can be read from. This pass walks the whole header over the mapped
//! bytes, allocating nothing beyond a list of the tensors, and rejects each of those
//! with one line naming the key or tensor and the numbers that disagree; `Ok` means
//! Candle's reader can parse the header and every tensor's bytes are in the file.
use crate::ops::quantized::{type_name, type_of_id};
use candle_core::quantized::GgmlDType;
use std::collections::HashSet;

/// llama.cpp's GGML_MAX_DIMS, also Candle's limit.
const MAX_DIMS: u32 = 4;
/// Nesting of arrays in metadata values (Candle's own cap).
const MAX_DEPTH: usize = 64;
/// Candle pads data to 32 bytes unless `general.alignment` says otherwise.
const DEFAULT_ALIGNMENT: u64 = 32;
/// Far above any real file's alignment (llama.cpp writes 32); keeps the data offset sane.
const MAX_ALIGNMENT: u64 = 1 << 16;

/// A tensor that passed validation: dims in Candle's order (outermost first).
pub struct TensorEntry {
    pub name: String,
    pub ty: GgmlDType,
    pub dims: Vec<usize>,
    /// Byte range in the file.
    pub start: usize,
    pub len: usize,
}

pub struct Header {
    pub version: u32,
    pub tensors: Vec<TensorEntry>,
    pub data_offset: u64,
}

type Res<T> = Result<T, String>;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// GGUF v1 writes lengths and dims as u32, later versions as u64.
    wide: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Res<&'a [u8]> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            return Err(format!("truncated file: {what} needs {n} bytes at offset {}, only {left} left", self.pos));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Res<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Res<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &str) -> Res<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    fn len(&mut self, what: &str) -> Res<u64> {
        if self.wide {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }
    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }
    fn string(&mut self, what: &str) -> Res<String> {
        let n = self.len(what)?;
        if n > self.left() {
            return Err(format!("{what}: string length {n} runs past the end of the file ({} bytes left)", self.left()));
        }
        let b = self.take(n, what)?;
        // As Candle: trailing NULs dropped, invalid UTF-8 replaced (real files have both).
        let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }
    fn min_size(&self, ty: u32) -> u64 {
        let len = if self.wide { 8 } else { 4 };
        match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => len,
            _ => 4 + len, // an array: its element type and length
        }
    }

    /// Skip one value of type `ty`; the integer value is returned for scalars
    /// (what `general.alignment` needs), None otherwise.
    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Res<Option<i128>> {
        if depth > MAX_DEPTH {
            return Err(format!("metadata {key:?}: arrays nested more than {MAX_DEPTH} deep"));
        }
        let what = format!("metadata {key:?}");
        let fixed = |r: &mut Self, n: u64| r.take(n, &what).map(|b| b.to_vec());
        Ok(match ty {
            0 => Some(self.u8(&what)?.into()),
            1 => Some((self.u8(&what)? as i8).into()),
            2 => Some(u16::from_le_bytes(fixed(self, 2)?.try_into().expect("2")).into()),
            3 => Some(i16::from_le_bytes(fixed(self, 2)?.try_into().expect("2")).into()),
            4 => Some(self.u32(&what)?.into()),
            5 => Some((self.u32(&what)? as i32).into()),
            10 => Some(self.u64(&what)?.into()),
            11 => Some((self.u64(&what)? as i64).into()),
            6 | 12 => {
                self.take(if ty == 6 { 4 } else { 8 }, &what)?;
                None
            }
            7 => match self.u8(&what)? {
                0 | 1 => None,
                b => return Err(format!("{what}: bool byte is {b}, expected 0 or 1")),
            },
            8 => {
                self.string(&what)?;
                None
            }
            9 => {
                let ety = self.u32(&what)?;
                if ety > 12 {
                    return Err(format!("{what}: unknown array element type {ety}"));
                }
                let n = self.len(&what)?;
                let need = n.saturating_mul(self.min_size(ety));
                if need > self.left() {
                    return Err(format!("{what}: array of {n} elements needs at least {need} bytes, only {} left", self.left()));
                }
                match ety {
                    // Fixed-size elements: one bounds check for the whole array.
                    0..=7 | 10..=12 => {
                        self.take(need, &what)?;
                        if ety == 7 {
                            let bytes = &self.buf[self.pos - need as usize..self.pos];
                            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                                return Err(format!("{what}: bool byte is {b}, expected 0 or 1"));
                            }
                        }
                    }
                    _ => {
                        for _ in 0..n {
                            self.value(ety, key, depth + 1)?;
                        }
                    }
                }
                None
            }
            t => return Err(format!("{what}: unknown value type {t}")),
        })
    }
}

/// Check the whole file's layout; `Ok` means Candle's reader can parse the header
/// and every tensor can be built from its declared bytes.
pub fn validate(buf: &[u8]) -> Res<Header> {
    if buf.len() < 4 || &buf[..4] != b"GGUF" {
        let got: Vec<u8> = buf.iter().take(4).copied().collect();
        return Err(format!("not a GGUF file: the magic is {got:02x?}, expected \"GGUF\""));
    }
    let mut r = Reader { buf, pos: 4, wide: true };
    let version = r.u32("the version")?;
    if !(1..=3).contains(&version) {
        return Err(format!("unsupported GGUF version {version} (1, 2 and 3 are read)"));
    }
    r.wide = version > 1;
    let n_tensors = r.len("the tensor count")?;
    let n_kv = r.len("the metadata count")?;
    // A key-value pair takes at least a length, a type and one byte; a tensor entry a
    // name length, a dim count, a type and an offset: counts the file cannot hold fail here.
    let lw = if r.wide { 8 } else { 4 };
    let need = n_kv.saturating_mul(lw + 5).saturating_add(n_tensors.saturating_mul(lw + 16));
    if need > r.left() {
        return Err(format!(
            "the header declares {n_tensors} tensors and {n_kv} metadata entries, which need at least {need} bytes; the file has {} left",
            r.left()
        ));
    }
    let mut keys = HashSet::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..n_kv {
        let key = r.string("a metadata key")?;
        let ty = r.u32(&format!("the type of metadata {key:?}"))?;
        let v = r.value(ty, &key, 0)?;
        if key == "general.alignment" {
            // Candle reads the alignment from the 8-, 16- and 32-bit integer types only.
            let a = match (ty, v) {
                (0..=5, Some(a)) => a,
                _ => return Err(format!("metadata \"general.alignment\" has value type {ty}, expected an unsigned 32-bit integer")),
            };
            if a <= 0 || a as u64 > MAX_ALIGNMENT || !(a as u64).is_power_of_two() {
                return Err(format!("general.alignment is {a}, expected a power of two up to {MAX_ALIGNMENT}"));
            }
            alignment = a as u64;
        }
        if !keys.insert(key.clone()) {
            return Err(format!("metadata key {key:?} appears more than once"));
        }
    }
    let mut names = HashSet::new();
    let mut infos = Vec::with_capacity(n_tensors as usize);
    for _ in 0..n_tensors {
        let name = r.string("a tensor name")?;
        let what = format!("tensor {name:?}");
        let nd = r.u32(&what)?;
        if nd == 0 || nd > MAX_DIMS {
            return Err(format!("{what} has {nd} dimensions, expected 1 to {MAX_DIMS}"));
        }
        let mut ne = Vec::with_capacity(nd as usize);
        for _ in 0..nd {
            ne.push(r.len(&what)?);
        }
        let id = r.u32(&what)?;
        let ty = type_of_id(id).ok_or_else(|| format!("{what} has GGML type id {id}, which Candle cannot read"))?;
        let offset = r.u64(&what)?;
        if !names.insert(name.clone()) {
            return Err(format!("tensor name {name:?} appears more than once"));
        }
        infos.push((name, ne, ty, offset));
    }
    let end = r.pos as u64;
    let data_offset = end.div_ceil(alignment) * alignment;
    let file = buf.len() as u64;
    let mut tensors = Vec::with_capacity(infos.len());
    for (name, ne, ty, offset) in infos {
        tensors.push(tensor_entry(name, ne, ty, offset, alignment, data_offset, file)?);
    }
    // No two tensors share bytes: a file cannot make us copy its data many times over.
    let mut spans: Vec<(usize, usize, &str)> = tensors.iter().filter(|t| t.len > 0).map(|t| (t.start, t.len, t.name.as_str())).collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(format!("tensors {:?} and {:?} overlap in the file", w[0].2, w[1].2));
        }
    }
    Ok(Header { version, tensors, data_offset })
}

fn tensor_entry(name: String, ne: Vec<u64>, ty: GgmlDType, offset: u64, align: u64, data: u64, file: u64) -> Res<TensorEntry> {
    let what = format!("tensor {name:?}");
    // GGUF lists dims innermost first (`ne[0]` is the row length).
    let shown: Vec<u64> = ne.iter().rev().copied().collect();
    let elems = ne.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).filter(|&e| e <= isize::MAX as u64);
    let Some(elems) = elems else {
        return Err(format!("{what}: the element count of shape {shown:?} overflows"));
    };
    let (bs, ts) = (ty.block_size() as u64, ty.type_size() as u64);
    if !ne[0].is_multiple_of(bs) {
        return Err(format!("{what}: shape {shown:?}: the last dim {} is not a multiple of {}'s block size {bs}", ne[0], type_name(ty)));
    }
    let len = elems / bs * ts;
    if len == 0 {
        // No bytes to read: where the (empty) data would start does not matter.
        let dims = shown.iter().map(|&d| d as usize).collect();
        return Ok(TensorEntry { name, ty, dims, start: 0, len: 0 });
    }
    if !offset.is_multiple_of(align) {
        return Err(format!("{what}: data offset {offset} is not a multiple of the alignment {align}"));
    }
    let start = data.checked_add(offset).filter(|s| s.checked_add(len).is_some_and(|e| e <= file));
    let Some(start) = start else {
        return Err(format!(
            "{what}: {len} bytes at data offset {offset} (file offset {}) run past the end of the {file}-byte file",
            data.saturating_add(offset)
        ));
    };
    let dims = shown.iter().map(|&d| d as usize).collect();
    Ok(TensorEntry { name, ty, dims, start: start as usize, len: len as usize })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn corpus() -> (PathBuf, serde_json::Value) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_gguf");
        let m = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
        (dir, m)
    }

    #[test]
    fn corpus_is_rejected_and_valid_files_pass() {
        let (dir, m) = corpus();
        for (name, expect) in m["reject"].as_object().unwrap() {
            let buf = std::fs::read(dir.join(format!("{name}.gguf"))).unwrap();
            let err = validate(&buf).err().unwrap_or_else(|| panic!("{name} passed validation"));
            assert!(err.contains(expect.as_str().unwrap()), "{name}: {err}");
        }
        for name in m["accept"].as_array().unwrap() {
            let buf = std::fs::read(dir.join(format!("{}.gguf", name.as_str().unwrap()))).unwrap();
            let h = validate(&buf).unwrap();
            // What passes must parse in Candle's reader too, at the same data offset.
            let c = candle_core::quantized::gguf_file::Content::read(&mut std::io::Cursor::new(&buf)).unwrap();
            assert_eq!(c.tensor_data_offset, h.data_offset);
        }
    }

    /// What Candle's own reader does with the corpus, unguarded (documentation, not a
    /// check: `cargo test --release --lib candle_reader -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn candle_reader_on_corpus() {
        let (dir, m) = corpus();
        for name in m["reject"].as_object().unwrap().keys() {
            let buf = std::fs::read(dir.join(format!("{name}.gguf"))).unwrap();
            let r = std::panic::catch_unwind(|| {
                let mut cur = std::io::Cursor::new(&buf);
                let c = candle_core::quantized::gguf_file::Content::read(&mut cur)?;
                let names: Vec<String> = c.tensor_infos.keys().cloned().collect();
                let mut shapes = Vec::new();
                for n in names {
                    shapes.push(format!("{:?}", c.tensor(&mut cur, &n, &candle_core::Device::Cpu)?.shape()));
                }
                Ok::<_, candle_core::Error>(format!("{} tensors {shapes:?}", c.tensor_infos.len()))
            });
            let what = match r {
                Ok(Ok(s)) => format!("ACCEPTED: {s}"),
                Ok(Err(e)) => format!("error: {}", e.to_string().lines().next().unwrap_or("")),
                Err(_) => "PANIC".to_string(),
            };
            println!("{name}: {what}");
        }
    }
}
