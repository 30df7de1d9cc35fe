//! Validation of a safetensors header before any tensor is built.
//!
//! The `safetensors` crate checks files too, but its errors do not say which
//! tensor is wrong, and it lets duplicate names and shapes whose element count
//! overflows (one zero dimension hides the others) through. This pass reads
//! only the header (at most 100 MB, as the crate allows), so a hostile file
//! costs no allocation beyond its header, and every rejection is one line that
//! names the tensor and the numbers that disagree.
use crate::dtype::DT;
use serde_json::{Map, Value};

/// The crate's limit; a larger header is refused before it is read.
const MAX_HEADER: u64 = 100_000_000;

/// A tensor entry that passed validation (the crate re-reads the data).
pub struct Entry {
    pub name: String,
    pub dt: DT,
    pub shape: Vec<usize>,
}

type Res<T> = Result<T, String>;

/// Check the whole file's layout; `Ok` means every tensor can be read as declared.
pub fn validate(buf: &[u8]) -> Res<Vec<Entry>> {
    let len = buf.len() as u64;
    if len < 8 {
        return Err(format!("file is {len} bytes, too short for the 8-byte header length"));
    }
    let n = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    if n > MAX_HEADER {
        return Err(format!("header length {n} is over the {MAX_HEADER}-byte limit (file is {len} bytes)"));
    }
    if n > len - 8 {
        return Err(format!("header length {n} runs past the end of the {len}-byte file"));
    }
    let text = std::str::from_utf8(&buf[8..8 + n as usize]).map_err(|e| format!("header is not valid UTF-8: {e}"))?;
    let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| format!("header is not a valid JSON object: {e}"))?;
    if let Some(dup) = duplicate_key(text) {
        return Err(format!("key {dup:?} appears more than once in the header"));
    }
    let data_len = len - 8 - n;
    let mut entries = Vec::with_capacity(map.len());
    let mut spans = Vec::with_capacity(map.len());
    for (name, v) in &map {
        if name == "__metadata__" {
            check_metadata(v)?;
            continue;
        }
        let (e, span) = entry(name, v, data_len)?;
        entries.push(e);
        spans.push((span, name.as_str()));
    }
    // Tensors must tile the data section exactly: no overlap, no gap, no tail.
    spans.sort();
    let mut end = 0u64;
    let mut prev = "";
    for ((s, e), name) in spans {
        if s < end {
            return Err(format!("tensors {prev:?} and {name:?} overlap (bytes {s}..{end} of the data)"));
        }
        if s > end {
            return Err(format!("no tensor covers bytes {end}..{s} of the data (before {name:?})"));
        }
        end = e;
        prev = name;
    }
    if end != data_len {
        return Err(format!("the data section is {data_len} bytes but the tensors cover {end}"));
    }
    Ok(entries)
}

fn check_metadata(v: &Value) -> Res<()> {
    match v {
        Value::Object(m) if m.values().all(Value::is_string) => Ok(()),
        _ => Err("__metadata__ must map strings to strings".to_string()),
    }
}

fn entry(name: &str, v: &Value, data_len: u64) -> Res<(Entry, (u64, u64))> {
    let bad = |what: String| format!("tensor {name:?}: {what}");
    let obj = v.as_object().ok_or_else(|| bad("entry is not a JSON object".into()))?;
    let dtype = obj.get("dtype").and_then(Value::as_str).ok_or_else(|| bad("missing or non-string dtype".into()))?;
    let dt = dt_of(dtype).map_err(bad)?;
    let shape: Vec<u64> = obj
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect())
        .ok_or_else(|| bad("shape must be a list of non-negative integers".into()))?;
    let offs: Vec<u64> = obj
        .get("data_offsets")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect())
        .filter(|o: &Vec<u64>| o.len() == 2)
        .ok_or_else(|| bad("data_offsets must be two non-negative integers".into()))?;
    let (s, e) = (offs[0], offs[1]);
    // Element counts must fit in i64, as in PyTorch, even when a zero
    // dimension makes the product small.
    let count = shape.iter().filter(|&&d| d != 0).try_fold(1u64, |a, &d| a.checked_mul(d).filter(|&p| p <= i64::MAX as u64));
    let count = count.ok_or_else(|| bad(format!("shape {shape:?} has an element count that overflows")))?;
    let count = if shape.contains(&0) { 0 } else { count };
    let need =
        count.checked_mul(dt.itemsize() as u64).ok_or_else(|| bad(format!("shape {shape:?} of {dtype} overflows the byte count")))?;
    if e < s {
        return Err(bad(format!("data_offsets [{s}, {e}] end before they start")));
    }
    if e > data_len {
        return Err(bad(format!("data_offsets [{s}, {e}] run past the end of the {data_len}-byte data section")));
    }
    if e - s != need {
        return Err(bad(format!("dtype {dtype} and shape {shape:?} need {need} bytes but data_offsets [{s}, {e}] hold {}", e - s)));
    }
    let shape = shape.iter().map(|&d| d as usize).collect();
    Ok((Entry { name: name.to_string(), dt, shape }, (s, e)))
}

fn dt_of(name: &str) -> Result<DT, String> {
    Ok(match name {
        "BOOL" => DT::Bool,
        "U8" => DT::U8,
        "I16" => DT::I16,
        "I32" => DT::I32,
        "I64" => DT::I64,
        "U32" => DT::U32,
        "F16" => DT::F16,
        "BF16" => DT::BF16,
        "F32" => DT::F32,
        "F64" => DT::F64,
        "I8" | "U16" | "U64" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F6_E2M3" | "F6_E3M2" | "F4" | "C64" => {
            return Err(format!("dtype {name} is not supported by candle_py"))
        }
        _ => return Err(format!("unknown dtype {name:?}")),
    })
}

/// The first key that occurs twice at the top level of a valid JSON object.
/// serde_json keeps only the last of duplicate keys, so they are found here by
/// scanning the text: keys are the strings at depth 1 that follow `{` or `,`.
fn duplicate_key(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut seen = std::collections::HashSet::new();
    let (mut depth, mut want_key, mut i) = (0usize, false, 0usize);
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                depth += 1;
                want_key = depth == 1 && b[i] == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => want_key = true,
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && want_key {
                    // Unescape through serde_json so "\u0061" and "a" compare equal.
                    let key: String = serde_json::from_str(text.get(i..=j)?).ok()?;
                    if !seen.insert(key.clone()) {
                        return Some(key);
                    }
                    want_key = false;
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    None
}
