//! Functions known never to return. A call to one ends its basic block with no fall-through,
//! so that the bytes after it (often the next function) are not taken for this function's code.

/// Whether a function of this name never returns. `name@plt` stubs count as their target.
pub fn is_noreturn_name(name: &str) -> bool {
    let name = name.strip_suffix("@plt").unwrap_or(name);
    let name = name.split('@').next().unwrap_or(name);
    const EXACT: &[&str] = &[
        "exit",
        "_exit",
        "_Exit",
        "quick_exit",
        "abort",
        "__stack_chk_fail",
        "__stack_chk_fail_local",
        "__assert_fail",
        "__assert_perror_fail",
        "__assert",
        "__fortify_fail",
        "__chk_fail",
        "__libc_fatal",
        "__libc_message",
        "__cxa_throw",
        "__cxa_rethrow",
        "__cxa_bad_cast",
        "__cxa_bad_typeid",
        "__cxa_pure_virtual",
        "__cxa_deleted_virtual",
        "__cxa_throw_bad_array_new_length",
        "__cxa_call_terminate",
        "__cxa_call_unexpected",
        "_Unwind_Resume",
        "_ZSt9terminatev",
        "_ZSt10unexpectedv",
        "pthread_exit",
        "longjmp",
        "_longjmp",
        "siglongjmp",
        "__longjmp_chk",
        "err",
        "errx",
        "verr",
        "verrx",
        "__ubsan_handle_builtin_unreachable",
        "llvm_unreachable_internal",
        "_ZN4llvm25llvm_unreachable_internalEPKcS1_j",
        "_ZN4llvm18report_fatal_errorEPKcb",
        "_ZN4llvm18report_fatal_errorERKNS_5TwineEb",
        // Linux kernel
        "panic",
        "do_exit",
        "do_group_exit",
        "make_task_dead",
        "kthread_exit",
        "rewind_stack_and_make_dead",
        "__x86_return_thunk_unreachable",
        "machine_real_restart",
        "cpu_startup_entry",
        "usercopy_abort",
        "__ubsan_handle_shift_out_of_bounds_abort",
    ];
    if EXACT.contains(&name) {
        return true;
    }
    // libstdc++'s std::__throw_* helpers: _ZSt<len>__throw_<what>...
    if let Some(rest) = name.strip_prefix("_ZSt") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        if rest.starts_with("__throw_") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::is_noreturn_name;

    #[test]
    fn known_names() {
        assert!(is_noreturn_name("abort"));
        assert!(is_noreturn_name("exit@plt"));
        assert!(is_noreturn_name("_ZSt20__throw_length_errorPKc"));
        assert!(is_noreturn_name("__stack_chk_fail@GLIBC_2.4"));
        assert!(!is_noreturn_name("printf"));
        assert!(!is_noreturn_name("exit_group_helper"));
    }
}
