// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): the `lut` decoder.
#ifndef QFWD_DECODE_LUT_CUH
#define QFWD_DECODE_LUT_CUH

// ---- lut ---------------------------------------------------------------------------------

// Syndrome -> the table entry, already in the wire's result format (decode/src/lut.rs), as
// a value (every lane): the flips, `*result_len` bytes of them on the wire, LSB first.
static __device__ __forceinline__ int qfwd_decode_lut_value(const u32* arg, u32 arg_len,
                                                            u32 out_cap, u32* result_len,
                                                            u64* flips, u32 lane)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    *result_len = 0u;
    if ((p.loaded & QFWD_DEC_LOADED_LUT) == 0u) {
        return QFWD_STATUS_UNKNOWN_FUNCTION;
    }
    const u32 n = p.lut_detectors;
    const u32 nb = (n + 7u) / 8u;
    const u32 eb = p.lut_entry_bytes;
    if (arg_len != nb + 4u || out_cap < eb || qfwd_dec_count(arg, nb) != n) {
        return QFWD_STATUS_BAD_ARGUMENT;
    }
    const u8* bytes = (const u8*)arg;
    u32 s = 0u;
    for (u32 k = 0; k < nb; ++k) {
        s |= (u32)bytes[k] << (8u * k);
    }
    s &= n >= 32u ? QFWD_DEC_FULL : (1u << n) - 1u;
    // The budget (decode/src/budget.rs): more defects than it allows are not looked up.
    if ((u32)__popc(s) > p.lut_max_defects) {
        return QFWD_STATUS_OVER_BUDGET;
    }
    const u8* entry = (const u8*)p.lut_table + (u64)s * eb;
    // Lane k loads byte k; the warp assembles them (eb <= 8).
    const u32 byte = lane < eb ? (u32)__ldg(entry + lane) : 0u;
    const u32 lo = __reduce_or_sync(QFWD_DEC_FULL, lane < 4u ? byte << (8u * lane) : 0u);
    const u32 hi =
        __reduce_or_sync(QFWD_DEC_FULL, lane >= 4u && lane < 8u ? byte << (8u * (lane - 4u)) : 0u);
    *flips = ((u64)hi << 32) | lo;
    *result_len = eb;
    return QFWD_STATUS_OK;
}

#endif // QFWD_DECODE_LUT_CUH
