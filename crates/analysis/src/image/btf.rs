//! BTF, the kernel's compact type information (/sys/kernel/btf/vmlinux): just enough of it to
//! find where a member lies in a struct, such as `pid` in `task_struct`, so that generated
//! code can read it from the running task.

/// Byte offset of `member` in `struct name`, or `None` when the BTF blob does not have it (or
/// it is a bit-field, or the blob is malformed).
pub fn member_offset(btf: &[u8], name: &str, member: &str) -> Option<u32> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(btf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(btf.get(o..o + 4)?.try_into().ok()?));
    if u16_at(0)? != 0xeb9f {
        return None;
    }
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let str_off = u32_at(16)? as usize;
    let strs = hdr_len + str_off;
    let string = |off: u32| -> Option<&str> {
        let start = strs + off as usize;
        let rest = btf.get(start..)?;
        let end = rest.iter().position(|b| *b == 0)?;
        std::str::from_utf8(&rest[..end]).ok()
    };
    let mut p = hdr_len + type_off;
    let end = p + type_len;
    while p + 12 <= end {
        let (name_off, info) = (u32_at(p)?, u32_at(p + 4)?);
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let kind_flag = info >> 31 == 1;
        p += 12;
        if kind == 4 && string(name_off)? == name {
            // STRUCT: vlen members of (name_off, type, offset); with kind_flag the offset
            // holds a bit-field size in its top 8 bits and the bit offset below.
            for k in 0..vlen {
                let m = p + 12 * k;
                if string(u32_at(m)?)? == member {
                    let off = u32_at(m + 8)?;
                    let bits = if kind_flag { off & 0x00ff_ffff } else { off };
                    let size = if kind_flag { off >> 24 } else { 0 };
                    return (size == 0 && bits % 8 == 0).then_some(bits / 8);
                }
            }
            return None;
        }
        p += match kind {
            1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
            3 => 12,                      // ARRAY
            4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
            6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
            _ => 0,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with `int` and `struct task { int a; int pid; }`.
    fn blob() -> Vec<u8> {
        let strs = b"\0int\0task\0a\0pid\0".to_vec();
        let mut types = Vec::new();
        let w = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
        // [1] INT "int", size 4, encoding
        w(&mut types, 1);
        w(&mut types, 1 << 24);
        w(&mut types, 4);
        w(&mut types, 32);
        // [2] STRUCT "task", 2 members, size 8
        w(&mut types, 5);
        w(&mut types, (4 << 24) | 2);
        w(&mut types, 8);
        for (name, off) in [(10u32, 0u32), (12, 32)] {
            w(&mut types, name);
            w(&mut types, 1);
            w(&mut types, off);
        }
        let mut b = Vec::new();
        b.extend_from_slice(&0xeb9fu16.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        w(&mut b, 24);
        w(&mut b, 0);
        w(&mut b, types.len() as u32);
        w(&mut b, types.len() as u32);
        w(&mut b, strs.len() as u32);
        b.extend_from_slice(&types);
        b.extend_from_slice(&strs);
        b
    }

    #[test]
    fn finds_a_member_offset() {
        let b = blob();
        assert_eq!(member_offset(&b, "task", "pid"), Some(4));
        assert_eq!(member_offset(&b, "task", "a"), Some(0));
        assert_eq!(member_offset(&b, "task", "nope"), None);
        assert_eq!(member_offset(&b, "other", "pid"), None);
        assert_eq!(member_offset(&b[..10], "task", "pid"), None);
    }
}
