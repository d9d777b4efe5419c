//! Telling model formats apart by their first bytes.
//!
//! Passing the two files in the wrong order, or a file of another kind entirely, is the most
//! common mistake; naming what the file looks like turns a decoder's riddle into advice.

/// What a model file appears to be, judged from its leading bytes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Empty,
    /// A zip archive: what `torch.jit.save` writes (and `torch.save`, which is not loadable).
    Zip,
    /// A protobuf that starts like an ONNX `ModelProto` (field 1, `ir_version`, a small varint).
    OnnxLike,
    /// A Python pickle (protocol 2 to 5): the legacy `torch.save` format.
    Pickle,
    Other,
}

pub fn sniff(bytes: &[u8]) -> FileKind {
    match bytes {
        [] => FileKind::Empty,
        [b'P', b'K', 3, 4, ..] => FileKind::Zip,
        [0x08, v, ..] if (1..=64).contains(v) => FileKind::OnnxLike,
        [0x80, p, ..] if (2..=5).contains(p) => FileKind::Pickle,
        _ => FileKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_kinds() {
        assert_eq!(sniff(b""), FileKind::Empty);
        assert_eq!(sniff(b"PK\x03\x04rest"), FileKind::Zip);
        assert_eq!(sniff(&[0x08, 0x08, 0x12, 0x07]), FileKind::OnnxLike);
        assert_eq!(sniff(b"hello"), FileKind::Other);
        assert_eq!(sniff(b"\x80\x02\x8a\x0a"), FileKind::Pickle);
    }
}
