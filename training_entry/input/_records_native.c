/* _trainpipe_records: TFRecord framing and CRC32C in C for the Pipe-mode reader.
 *
 * records.py's pure-Python reader spends its time in per-record Python work (struct unpack,
 * two CRC calls, slicing, a generator step) under the GIL. This module does the framing and
 * both CRCs of a whole buffer in one call, with the GIL released, and hands back a list of
 * payloads; records.py keeps the buffering, the EOF rules and every error message, so the two
 * readers refuse the same records with the same words (tests run the same cases on both).
 *
 * Built by scripts/build_native.sh (scripts/install.sh runs it at install time and caches the
 * result); when it is absent, records.py falls back to the Python reader.
 *
 *   split(data, limit, verify, max_length) -> (payloads, consumed, error)
 *       Frames from the start of ``data`` (any buffer): at most ``limit`` whole records.
 *       ``consumed``: bytes of ``data`` those records span. ``error``: None, or
 *       ("length" | "data" | "size", byte offset within data) for the first record whose
 *       length CRC or data CRC does not match, or whose length (its CRC checked first, when
 *       verifying) is over ``max_length`` (records.MAX_RECORD_BYTES); the records before it
 *       are returned. An incomplete record at the end is not an error: the caller reads
 *       more, or decides at EOF.
 *   frame(payloads) -> bytes
 *       The TFRecord framing of every payload (a sequence of bytes), back to back.
 *   api: 2 (split takes max_length); records.py uses a module of its own API only.
 *   masked_crc32c(data, portable=False) -> int
 *       portable: the table implementation even where SSE4.2 is present (for the tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* --- CRC32C (Castagnoli) ------------------------------------------------------------------ */
static uint32_t table[8][256];
static int have_sse42;

static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        table[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

/* Slice-by-8: any CPU. */
static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;  /* little-endian: the low 4 bytes carry the CRC */
        crc = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
              table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
              table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
/* SSE4.2's crc32 instruction computes exactly CRC32C; chosen at run time (cpuid). */
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#if defined(__x86_64__)
    if (have_sse42) return crc_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc_table(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

static uint32_t masked(const unsigned char *p, size_t n) {
    uint32_t crc = crc32c(p, n);
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static uint64_t load_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t load_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void store_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void store_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }

/* --- split ---------------------------------------------------------------------------------- */
enum { OK = 0, BAD_LENGTH = 1, BAD_DATA = 2, TOO_LONG = 3 };
#define NATIVE_API 2

static PyObject *split(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t limit, max_length;
    int verify;
    if (!PyArg_ParseTuple(args, "y*npn:split", &view, &limit, &verify, &max_length)) return NULL;
    uint64_t longest = max_length > 0 ? (uint64_t)max_length : 0;
    const unsigned char *data = view.buf;
    size_t size = (size_t)view.len;
    size_t cap = limit > 0 ? (size_t)limit : 0;
    size_t *starts = NULL, *lengths = NULL;
    if (cap) {
        /* At most one record per 16 bytes. */
        size_t most = size / 16 + 1;
        if (cap > most) cap = most;
        starts = PyMem_Malloc(cap * sizeof(size_t));
        lengths = PyMem_Malloc(cap * sizeof(size_t));
        if (!starts || !lengths) {
            PyMem_Free(starts);
            PyMem_Free(lengths);
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
    }
    size_t count = 0, offset = 0, bad_at = 0;
    int status = OK;
    Py_BEGIN_ALLOW_THREADS
    while (count < cap && size - offset >= 12) {
        const unsigned char *header = data + offset;
        uint64_t length = load_u64(header);
        if (verify && load_u32(header + 8) != masked(header, 8)) { status = BAD_LENGTH; bad_at = offset; break; }
        if (length > longest) { status = TOO_LONG; bad_at = offset; break; }
        if (length > size - offset - 12 || size - offset - 12 - length < 4) break; /* incomplete */
        if (verify && load_u32(header + 12 + length) != masked(header + 12, (size_t)length)) {
            status = BAD_DATA;
            bad_at = offset;
            break;
        }
        starts[count] = offset + 12;
        lengths[count] = (size_t)length;
        count++;
        offset += 16 + (size_t)length;
    }
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        PyObject *item = PyBytes_FromStringAndSize((const char *)data + starts[i], (Py_ssize_t)lengths[i]);
        if (!item) { Py_CLEAR(list); break; }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    PyMem_Free(starts);
    PyMem_Free(lengths);
    PyBuffer_Release(&view);
    if (!list) return NULL;
    if (status == OK) return Py_BuildValue("(NnO)", list, (Py_ssize_t)offset, Py_None);
    const char *what = status == BAD_LENGTH ? "length" : status == BAD_DATA ? "data" : "size";
    return Py_BuildValue("(Nn(sn))", list, (Py_ssize_t)offset, what, (Py_ssize_t)bad_at);
}

/* --- frame ---------------------------------------------------------------------------------- */
static PyObject *frame(PyObject *self, PyObject *payloads) {
    /* A tuple of our own: it holds a reference to every payload while the GIL is released,
     * whatever another thread does to the caller's list meanwhile. */
    PyObject *seq = PySequence_Tuple(payloads);
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "frame() takes a sequence of bytes");
            return NULL;
        }
        size_t length = (size_t)PyBytes_GET_SIZE(items[i]);
        if (length > (size_t)PY_SSIZE_T_MAX - 16 - total) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_OverflowError, "frame(): the framed payloads would not fit in one bytes");
            return NULL;
        }
        total += 16 + length;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) { Py_DECREF(seq); return NULL; }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    /* The payloads are immutable bytes held by our tuple: safe without the GIL. */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t length = (size_t)PyBytes_GET_SIZE(items[i]);
        store_u64(p, length);
        store_u32(p + 8, masked(p, 8));
        memcpy(p + 12, PyBytes_AS_STRING(items[i]), length);
        store_u32(p + 12 + length, masked(p + 12, length));
        p += 16 + length;
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(seq);
    return out;
}

static PyObject *masked_crc(PyObject *self, PyObject *args) {
    Py_buffer view;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "y*|p:masked_crc32c", &view, &portable)) return NULL;
    uint32_t crc;
    if (portable) { /* the slice-by-8 path, whatever the CPU: for the tests */
        crc = crc_table(0xFFFFFFFFu, view.buf, (size_t)view.len) ^ 0xFFFFFFFFu;
        crc = ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
    } else {
        crc = masked(view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"split", split, METH_VARARGS, "split(data, limit, verify, max_length) -> (payloads, consumed, error)"},
    {"frame", frame, METH_O, "frame(payloads) -> bytes"},
    {"masked_crc32c", masked_crc, METH_VARARGS, "masked_crc32c(data, portable=False) -> int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trainpipe_records", NULL, -1, methods};

#ifndef TRAINPIPE_SOURCE_SHA256
#define TRAINPIPE_SOURCE_SHA256 "unknown"
#endif

PyMODINIT_FUNC PyInit__trainpipe_records(void) {
    make_tables();
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddStringConstant(m, "source_sha256", TRAINPIPE_SOURCE_SHA256) < 0 ||
        PyModule_AddIntConstant(m, "api", NATIVE_API) < 0 ||
        PyModule_AddStringConstant(m, "crc", have_sse42 ? "sse4.2" : "slice-by-8") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
