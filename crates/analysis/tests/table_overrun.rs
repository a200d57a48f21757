//! A jump table whose bound comes from a mask wider than the index's real range reads past
//! its end into the next table's entries, which, taken relative to this table's base, land
//! anywhere: in libLLVM-14 often inside the padding after another function. Such entries
//! must not start functions there (a block in padding became a splice site inside the bytes
//! a springboard or a padded jump had taken), and the padding must stay springboard space.

use kerf_analysis::cfg::TableFormat;
use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::ImageAddr;

const BASE: u64 = 0x1000;
const TABLE: u64 = 0x1080;

/// `sw` (0x1000, switch on `edi & 3` through a 4-entry relative table of which two entries
/// are real), `g` (0x1040: `ret`, then 15 bytes of nops) and `h` (0x1050: `ret`).
fn image_bytes() -> Vec<u8> {
    let mut code = vec![0xcc; 0x90];
    let mut put = |at: u64, bytes: &[u8]| {
        let o = (at - BASE) as usize;
        code[o..o + bytes.len()].copy_from_slice(bytes);
    };
    let lea_disp = (TABLE - 0x100c) as u32;
    put(0x1000, &[0x89, 0xf8]); // mov eax, edi
    put(0x1002, &[0x83, 0xe0, 0x03]); // and eax, 3
    put(0x1005, &[0x48, 0x8d, 0x15]); // lea rdx, [rip+TABLE]
    put(0x1008, &lea_disp.to_le_bytes());
    put(0x100c, &[0x48, 0x63, 0x04, 0x82]); // movsxd rax, [rdx+rax*4]
    put(0x1010, &[0x48, 0x01, 0xd0]); // add rax, rdx
    put(0x1013, &[0xff, 0xe0]); // jmp rax
    put(0x1015, &[0xb8, 1, 0, 0, 0, 0xc3]); // case 0: mov eax, 1; ret
    put(0x101b, &[0xb8, 2, 0, 0, 0, 0xc3]); // case 1: mov eax, 2; ret
    put(0x1040, &[0xc3]); // g: ret
    put(0x1041, &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00]); // nopw 0(rax,rax,1)
    put(0x1047, &[0x0f, 0x1f, 0x80, 0, 0, 0, 0]); // nopl 0(rax)
    put(0x104e, &[0x66, 0x90]); // xchg ax, ax
    put(0x1050, &[0xc3]); // h: ret
                          // Entries 2 and 3 belong to "another table": one lands inside the nopw, one on the nopl.
    for (k, target) in [0x1015u64, 0x101b, 0x1043, 0x1047].iter().enumerate() {
        let rel = (*target as i64 - TABLE as i64) as i32;
        put(TABLE + 4 * k as u64, &rel.to_le_bytes());
    }
    code
}

#[test]
fn table_entries_past_the_end_start_no_function_in_padding() {
    let code = image_bytes();
    let mut image = Image::raw("overrun", &code, ImageAddr(BASE));
    let syms = "0000000000001000 0000000000000021 T sw\n\
                0000000000001040 0000000000000001 T g\n\
                0000000000001050 0000000000000001 T h\n";
    assert_eq!(image.add_symbol_file(syms), Ok(3));
    let mut a = analyze(&image, &Quiet);
    let entries: Vec<u64> = a.cfg.functions.iter().map(|f| f.entry.0).collect();
    assert_eq!(entries, [0x1000, 0x1040, 0x1050], "functions: {:?}", a.cfg.functions);
    // The table was read (its real cases are blocks of `sw`), all four entries kept.
    let t = a.cfg.jump_tables.first().expect("the switch's table is resolved");
    assert!(matches!(t.format, TableFormat::Relative32 { .. }));
    let targets: Vec<u64> = t.targets.iter().map(|x| x.0).collect();
    assert_eq!(targets, [0x1015, 0x101b, 0x1043, 0x1047]);
    let sw = &a.cfg.functions[0];
    let starts: Vec<u64> =
        a.cfg.blocks_of(kerf_analysis::cfg::FuncId(0)).iter().map(|b| b.start.0).collect();
    assert!(starts.contains(&0x1015) && starts.contains(&0x101b), "{} blocks {starts:x?}", sw.name);
    // The nops after `g` are one padding run, springboard space, with no block in it.
    let pads: Vec<(u64, u32)> = a.cfg.padding.iter().map(|p| (p.start.0, p.len)).collect();
    assert!(pads.contains(&(0x1041, 15)), "padding {pads:x?}");
    assert!(a.cfg.blocks.iter().all(|b| b.start.0 + b.len as u64 <= 0x1041 || b.start.0 >= 0x1050));
    kerf_analysis::validate::validate(&mut a, &image).expect("the analysis checks out");
}
