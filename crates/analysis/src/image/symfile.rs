//! Symbol files: `nm` output, System.map and /proc/kallsyms, one `ADDRESS TYPE NAME` per line
//! (kallsyms adds `\t[module]`). They give the kernel its symbols, where there is no ELF file
//! to read them from.

use super::{Binding, ImageError, Symbol, SymbolKind, SymbolSource};
use kerf_arch::ImageAddr;

/// One parsed line before it meets an image.
pub(crate) struct Entry {
    pub symbol: Symbol,
    /// A weak symbol (`W`, `w`, `V`, `v`): the file does not say whether it is code or data,
    /// so an image decides by the section its address falls in.
    pub weak: bool,
}

/// Parse a symbol file. Lines without an address (undefined symbols in nm output), blank
/// lines and symbol types that name nothing analysable (absolute, debug, undefined) are
/// skipped; anything else that is not a symbol line is an error naming the line.
///
/// Types: `T`/`t` and `i` (GNU indirect function) are functions; `D d B b R r G g S s` and
/// `u` (GNU unique global) are objects; `W w` are weak and taken as functions, `V v` are weak
/// objects. Lower case means local, except for `w`, `v`, `i` and `u`. Sizes are 0, unless
/// the file is `nm -S` output, which has a size column after the address.
pub fn parse_symbol_file(text: &str) -> Result<Vec<Symbol>, ImageError> {
    Ok(parse_entries(text)?.into_iter().map(|e| e.symbol).collect())
}

pub(crate) fn parse_entries(text: &str) -> Result<Vec<Entry>, ImageError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(entry)) => out.push(entry),
            Ok(None) => {}
            Err(()) => {
                return Err(ImageError::BadSymbolLine { line_no: index + 1, line: clip(line) })
            }
        }
    }
    Ok(out)
}

/// The line as reported in an error: a symbol "file" that is really a binary could otherwise
/// put megabytes into one error message.
fn clip(line: &str) -> String {
    const MAX: usize = 200;
    if line.len() <= MAX {
        return line.to_string();
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

/// `Ok(None)`: a line to skip. `Err(())`: not a symbol line.
fn parse_line(line: &str) -> Result<Option<Entry>, ()> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    // kallsyms: "ADDR TYPE NAME\t[module]"; the name itself never holds a tab.
    let (head, module) = match line.split_once('\t') {
        Some((head, tail)) => {
            let module = tail
                .trim()
                .strip_prefix('[')
                .and_then(|m| m.strip_suffix(']'))
                .filter(|m| !m.is_empty())
                .ok_or(())?;
            (head, Some(module))
        }
        None => (line, None),
    };
    let head = head.trim_end();

    // nm prints undefined symbols with blanks where the address goes: "         U name".
    if head.starts_with(' ') {
        let (ty, name) = split_word(head.trim_start()).ok_or(())?;
        return if ty.chars().count() == 1 && !name.is_empty() { Ok(None) } else { Err(()) };
    }

    let (addr, rest) = split_word(head).ok_or(())?;
    let addr = parse_hex(addr).ok_or(())?;
    let (mut ty, mut rest) = split_word(rest).ok_or(())?;
    let mut size = 0;
    if ty.len() > 1 {
        // `nm -S`: ADDR SIZE TYPE NAME.
        size = parse_hex(ty).ok_or(())?;
        (ty, rest) = split_word(rest).ok_or(())?;
    }
    let mut chars = ty.chars();
    let (Some(ty), None) = (chars.next(), chars.next()) else {
        return Err(());
    };
    // The name runs to the end (demangled C++ names contain spaces).
    if rest.is_empty() {
        return Err(());
    }
    let (kind, binding, weak) = match ty {
        'T' => (SymbolKind::Function, Binding::Global, false),
        't' => (SymbolKind::Function, Binding::Local, false),
        'i' => (SymbolKind::Function, Binding::Global, false),
        'W' | 'w' => (SymbolKind::Function, Binding::Weak, true),
        'V' | 'v' => (SymbolKind::Object, Binding::Weak, true),
        'D' | 'B' | 'R' | 'G' | 'S' | 'u' => (SymbolKind::Object, Binding::Global, false),
        'd' | 'b' | 'r' | 'g' | 's' => (SymbolKind::Object, Binding::Local, false),
        // A, a (absolute), U (undefined), N (debug), C (common), ?, -: nothing to analyse.
        _ => return Ok(None),
    };
    Ok(Some(Entry {
        symbol: Symbol {
            name: rest.to_string(),
            addr: ImageAddr(addr),
            size,
            kind,
            binding,
            source: SymbolSource::SymbolFile,
            module: module.map(str::to_string),
        },
        weak,
    }))
}

/// The first space-separated word of `s` and what follows the single space after it.
fn split_word(s: &str) -> Option<(&str, &str)> {
    if s.is_empty() || s.starts_with(' ') {
        return None;
    }
    Some(match s.split_once(' ') {
        Some((word, rest)) => (word, rest.trim_start_matches(' ')),
        None => (s, ""),
    })
}

/// A hex number as nm and the kernel print it: up to 16 digits, optionally with `0x`.
fn parse_hex(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}
