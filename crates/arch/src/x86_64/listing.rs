//! Disassembly listings in Intel syntax, one line per instruction: what golden files of
//! generated code and patch layouts show, and what people read.

use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};

/// One disassembled instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub ip: u64,
    /// Its bytes, as two-digit hex separated by spaces.
    pub hex: String,
    /// Intel syntax.
    pub text: String,
}

/// Every instruction of `bytes`, decoded as if they were at `ip` (bytes that do not decode
/// show as iced's `(bad)` lines, as a listing should).
pub fn listing(bytes: &[u8], ip: u64) -> Vec<Line> {
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut f = IntelFormatter::new();
    let mut out = Vec::new();
    while d.can_decode() {
        let at = d.position();
        let i = d.decode();
        let mut text = String::new();
        f.format(&i, &mut text);
        let hex: Vec<String> = bytes[at..at + i.len()].iter().map(|b| format!("{b:02x}")).collect();
        out.push(Line { ip: i.ip(), hex: hex.join(" "), text });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_addresses_bytes_and_text() {
        let l = listing(&[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000);
        let got: Vec<(u64, &str, &str)> =
            l.iter().map(|l| (l.ip, l.hex.as_str(), l.text.as_str())).collect();
        assert_eq!(
            got,
            [
                (0x1000, "55", "push rbp"),
                (0x1001, "48 89 e5", "mov rbp,rsp"),
                (0x1004, "c3", "ret")
            ]
        );
    }
}
