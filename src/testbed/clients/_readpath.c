/* The streamed response's per-read path, compiled: testbed.clients._readpath.
 *
 * A token-by-token stream is one read per token, each carrying one HTTP/1.1 chunk that holds
 * one server-sent event (`data: {...}\n\n`). In Python that read runs four frames (the
 * connection's data_received, the sink's on_data, the SSE parser, the decoder) between two
 * sleeps of the event loop; these three take that common read without a Python frame and
 * hand everything else to the Python code they stand in front of:
 *
 *   ChunkReader.data_received  (base of http1.CompiledHttp1Connection)
 *       stamps the read; one whole chunk, nothing buffered -> sink.on_data(chunk, t_ns);
 *       anything else -> self._parse_read(data, t_ns) (the Python parser, the reference).
 *   EventReader.on_data        (base of response.CompiledStreamSink)
 *       one whole `data: ` event, nothing buffered, no error body, the stream not ended
 *       (anything after its end is an error StreamSink.on_data words) -> orjson.loads and the
 *       sink's decoder, as StreamSink.on_data does; anything else, and any payload orjson
 *       refuses -> self._on_data_py(data, t_ns) (StreamSink.on_data, the reference); a
 *       decoder's exception -> self._unreadable(exc, obj), as StreamSink.on_data does.
 *   ChoicesDecoder(openai.decode_chunk)
 *       an OpenAI chunk of the plain shape is read here; anything else by decode_chunk.
 *
 * None decides anything the Python path would decide differently: each takes only reads
 * whose outcome the Python code computes the same way, and tests feed both paths the same
 * bytes, split everywhere. The attribute names below are the Python classes' own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

static PyObject *s_got_bytes, *s_sink, *s_state, *s_buf, *s_parse_read, *s_on_data,
    *s_on_data_py, *s_error_body, *s_sse, *s_response, *s_ended, *s_events, *s_keep_raw,
    *s_raw, *s_decode, *s_unreadable, *s_error, *s_choices, *s_text, *s_delta,
    *s_message, *s_content, *s_chunks, *s_finish_reason, *s_usage, *s_index;
static PyObject *one, *loads;
/* http1._CHUNK_SIZE: the parser waits for a chunk's size line (set by configure(); until
 * then every read goes to the Python parser). */
static long chunk_size_state = -1;

/* The clock of testbed.core.clock.monotonic_ns (time.perf_counter_ns: CLOCK_MONOTONIC). */
static PyObject *stamp(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

static PyObject *call2(PyObject *self, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *args[3] = {self, a, b};
    return PyObject_VectorcallMethod(name, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* 1 when `obj.name` is an empty bytes object, 0 when not, -1 on error. */
static int empty_bytes(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    int empty = PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) == 0;
    Py_DECREF(value);
    return empty;
}

/* The offset of the one whole chunk's data in `p[0:n]` (hex size, CRLF, data, CRLF) and
 * its size, or 0 when the read is anything else. */
static Py_ssize_t one_chunk(const char *p, Py_ssize_t n, Py_ssize_t *size) {
    Py_ssize_t i = 0, v = 0;
    for (; i < n && i < 8 && p[i] != '\r'; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + d;
    }
    if (i == 0 || v == 0 || n - i < 4 || p[i] != '\r' || p[i + 1] != '\n') return 0;
    Py_ssize_t end = i + 2 + v;
    if (n != end + 2 || p[end] != '\r' || p[end + 1] != '\n') return 0;
    *size = v;
    return i + 2;
}

static PyObject *ChunkReader_data_received(PyObject *self, PyObject *data) {
    PyObject *t_ns = stamp(), *sink = NULL, *result = NULL;
    if (t_ns == NULL) return NULL;
    if (PyObject_SetAttr(self, s_got_bytes, Py_True) < 0) goto done;
    sink = PyObject_GetAttr(self, s_sink);
    if (sink == NULL) goto done;
    if (sink == Py_None) {  /* bytes after a finished response */
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t start = 0, size = 0;
    if (PyBytes_CheckExact(data)) {
        PyObject *state = PyObject_GetAttr(self, s_state);
        if (state == NULL) goto done;
        int waiting = PyLong_CheckExact(state) && PyLong_AsLong(state) == chunk_size_state;
        Py_DECREF(state);
        int idle = waiting ? empty_bytes(self, s_buf) : 0;
        if (idle < 0) goto done;
        if (idle) start = one_chunk(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &size);
    }
    if (start == 0) {
        result = call2(self, s_parse_read, data, t_ns);
        goto done;
    }
    PyObject *chunk = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, size);
    if (chunk == NULL) goto done;
    result = call2(sink, s_on_data, chunk, t_ns);
    Py_DECREF(chunk);
done:
    Py_XDECREF(sink);
    Py_DECREF(t_ns);
    return result;
}

/* 1 when `data` is exactly one `data: ...\n\n` event (its only line ends where it ends). */
static int one_event(const char *p, Py_ssize_t n) {
    return n >= 8 && memcmp(p, "data: ", 6) == 0 && p[n - 1] == '\n'
        && memchr(p, '\n', (size_t)n) == p + n - 2 && memchr(p, '\r', (size_t)n) == NULL;
}

/* 1 when the sink is between events with no error body (the event path may take the read). */
static int sink_idle(PyObject *self) {
    PyObject *error_body = PyObject_GetAttr(self, s_error_body);
    if (error_body == NULL) return -1;
    int idle = error_body == Py_None;
    Py_DECREF(error_body);
    if (!idle) return 0;
    PyObject *sse = PyObject_GetAttr(self, s_sse);
    if (sse == NULL) return -1;
    idle = empty_bytes(sse, s_buf);
    Py_DECREF(sse);
    return idle;
}

static int add_event(PyObject *response, PyObject *self, PyObject *obj) {
    PyObject *events = PyObject_GetAttr(response, s_events);
    if (events == NULL) return -1;
    PyObject *more = PyNumber_Add(events, one);
    Py_DECREF(events);
    if (more == NULL) return -1;
    int rc = PyObject_SetAttr(response, s_events, more);
    Py_DECREF(more);
    if (rc < 0) return -1;
    PyObject *keep = PyObject_GetAttr(self, s_keep_raw);
    if (keep == NULL) return -1;
    int keep_raw = PyObject_IsTrue(keep);
    Py_DECREF(keep);
    if (keep_raw <= 0) return keep_raw;
    PyObject *raw = PyObject_GetAttr(response, s_raw);
    if (raw == NULL) return -1;
    rc = PyList_Append(raw, obj);
    Py_DECREF(raw);
    return rc;
}

static PyObject *EventReader_on_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "on_data() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *data = args[0], *t_ns = args[1];
    if (!PyBytes_CheckExact(data))
        return call2(self, s_on_data_py, data, t_ns);
    const char *p = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    int idle = one_event(p, n) ? sink_idle(self) : 0;
    if (idle < 0) return NULL;
    if (!idle) return call2(self, s_on_data_py, data, t_ns);
    const char *payload = p + 6;
    Py_ssize_t size = n - 8;
    PyObject *response = PyObject_GetAttr(self, s_response), *obj = NULL, *result = NULL;
    if (response == NULL) return NULL;
    PyObject *ended = PyObject_GetAttr(response, s_ended);
    if (ended == NULL) goto done;
    int after_end = PyObject_IsTrue(ended);
    Py_DECREF(ended);
    if (after_end < 0) goto done;
    if (after_end) {  /* anything after the stream's end is the server's error: Python says so */
        result = call2(self, s_on_data_py, data, t_ns);
        goto done;
    }
    if (size == 6 && memcmp(payload, "[DONE]", 6) == 0) {
        if (PyObject_SetAttr(response, s_ended, Py_True) == 0) result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *view = PyMemoryView_FromMemory((char *)payload, size, PyBUF_READ);
    if (view == NULL) goto done;
    obj = PyObject_CallOneArg(loads, view);
    Py_DECREF(view);
    if (obj == NULL) {  /* the Python path parses it again and says why it failed */
        PyErr_Clear();
        result = call2(self, s_on_data_py, data, t_ns);
        goto done;
    }
    if (add_event(response, self, obj) < 0) goto done;
    PyObject *decode = PyObject_GetAttr(self, s_decode);
    if (decode == NULL) goto done;
    PyObject *decode_args[3] = {response, obj, t_ns};
    result = PyObject_Vectorcall(decode, decode_args, 3, NULL);
    Py_DECREF(decode);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        /* JSON not in the protocol's shape: the response's error, as the Python path says */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        result = call2(self, s_unreadable, value, obj);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    }
done:
    Py_XDECREF(obj);
    Py_DECREF(response);
    return result;
}

/* ChoicesDecoder(fallback): OpenAI's decode_chunk for the plain shape of a completions or chat
 * chunk — a dict whose "choices" is a list of dicts (or null), whose "error" is absent or
 * empty, whose first choice has index 0 (or none), string text and finish reason, and no text
 * after the finish reason, whose usage is a dict — and `fallback` (openai.decode_chunk, the
 * reference, which says what is wrong with the rest) for anything else, decided before
 * anything is written. */
typedef struct {
    PyObject_HEAD
    PyObject *fallback;
    vectorcallfunc vectorcall;
} ChoicesDecoder;

/* dict.get, with a borrowed reference; NULL (no error set) when the key is absent. */
static PyObject *get(PyObject *dict, PyObject *key) {
    return PyDict_GetItemWithError(dict, key);
}

/* 1 decoded, 0 not the plain shape (nothing written), -1 error. */
static int decode_plain(PyObject *response, PyObject *obj, PyObject *t_ns) {
    if (!PyDict_CheckExact(obj)) return 0;
    PyObject *error = get(obj, s_error), *choices = get(obj, s_choices);
    PyObject *text = NULL, *reason = NULL;
    if (PyErr_Occurred()) return -1;
    if (error != NULL && PyObject_IsTrue(error)) return 0;
    if (choices == NULL) return 0;  /* not a chunk: an error object at the top level? */
    if (choices != Py_None) {
        if (!PyList_CheckExact(choices)) return 0;
        if (PyList_GET_SIZE(choices)) {
            PyObject *choice = PyList_GET_ITEM(choices, 0);
            if (!PyDict_CheckExact(choice)) return 0;
            PyObject *index = get(choice, s_index);
            if (index != NULL && index != Py_None) {
                int overflow = 0;
                if (!PyLong_CheckExact(index) || PyLong_AsLongAndOverflow(index, &overflow) != 0
                    || overflow)
                    return PyErr_Occurred() ? -1 : 0;
            }
            text = get(choice, s_text);
            if (text == NULL || text == Py_None) {
                PyObject *message = get(choice, s_delta);
                if (message == NULL || !PyObject_IsTrue(message)) message = get(choice, s_message);
                text = NULL;
                if (message != NULL && PyObject_IsTrue(message)) {
                    if (!PyDict_CheckExact(message)) return 0;
                    text = get(message, s_content);
                }
            }
            reason = get(choice, s_finish_reason);
            if (PyErr_Occurred()) return -1;
        }
    }
    int has_text = text != NULL && PyObject_IsTrue(text);
    if (has_text) {
        if (!PyUnicode_CheckExact(text)) return 0;
        PyObject *before = PyObject_GetAttr(response, s_finish_reason);
        if (before == NULL) return -1;
        int finished = before != Py_None;
        Py_DECREF(before);
        if (finished) return 0;  /* content after the finish reason */
    }
    int has_reason = reason != NULL && PyObject_IsTrue(reason);
    if (has_reason && !PyUnicode_CheckExact(reason)) return 0;
    PyObject *usage = get(obj, s_usage);
    if (PyErr_Occurred()) return -1;
    int has_usage = usage != NULL && PyObject_IsTrue(usage);
    if (has_usage && !PyDict_CheckExact(usage)) return 0;
    if (has_text) {
        PyObject *chunks = PyObject_GetAttr(response, s_chunks);
        if (chunks == NULL) return -1;
        PyObject *pair = PyTuple_Pack(2, t_ns, text);
        int rc = pair == NULL ? -1 : PyList_Append(chunks, pair);
        Py_XDECREF(pair);
        Py_DECREF(chunks);
        if (rc < 0) return -1;
    }
    if (has_reason && PyObject_SetAttr(response, s_finish_reason, reason) < 0) return -1;
    if (has_usage && PyObject_SetAttr(response, s_usage, usage) < 0) return -1;
    return PyErr_Occurred() ? -1 : 1;
}

static PyObject *ChoicesDecoder_vectorcall(
    PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *fallback = ((ChoicesDecoder *)self)->fallback;
    if (PyVectorcall_NARGS(nargsf) == 3 && kwnames == NULL) {
        int decoded = decode_plain(args[0], args[1], args[2]);
        if (decoded < 0 || PyErr_Occurred()) return NULL;  /* a __bool__ that raised */
        if (decoded) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

static PyObject *ChoicesDecoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "O:ChoicesDecoder", &fallback)) return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "ChoicesDecoder(fallback): fallback must be callable");
        return NULL;
    }
    ChoicesDecoder *self = (ChoicesDecoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->fallback = Py_NewRef(fallback);
    self->vectorcall = ChoicesDecoder_vectorcall;
    return (PyObject *)self;
}

static int ChoicesDecoder_traverse(ChoicesDecoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    return 0;
}

static void ChoicesDecoder_dealloc(ChoicesDecoder *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef ChoicesDecoder_members[] = {
    {"fallback", T_OBJECT_EX, offsetof(ChoicesDecoder, fallback), READONLY,
     "What decodes every object that is not the plain shape."},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *configure(PyObject *module, PyObject *arg) {
    long state = PyLong_AsLong(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    chunk_size_state = state;
    Py_RETURN_NONE;
}

static PyMethodDef ChunkReader_methods[] = {
    {"data_received", (PyCFunction)ChunkReader_data_received, METH_O,
     "Stamp the read; one whole chunk goes to the sink, anything else to _parse_read."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef EventReader_methods[] = {
    {"on_data", (PyCFunction)(void (*)(void))EventReader_on_data, METH_FASTCALL,
     "One whole data event is decoded here, anything else goes to _on_data_py."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ChunkReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "testbed.clients._readpath.ChunkReader",
    .tp_doc = "The compiled data_received of an HTTP/1.1 connection (a base class).",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = ChunkReader_methods,
};

static PyTypeObject EventReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "testbed.clients._readpath.EventReader",
    .tp_doc = "The compiled on_data of a streamed response's sink (a base class).",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = EventReader_methods,
};

static PyTypeObject ChoicesDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "testbed.clients._readpath.ChoicesDecoder",
    .tp_doc = "ChoicesDecoder(fallback): OpenAI's decode_chunk for the plain shape.",
    .tp_basicsize = sizeof(ChoicesDecoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = ChoicesDecoder_new,
    .tp_dealloc = (destructor)ChoicesDecoder_dealloc,
    .tp_traverse = (traverseproc)ChoicesDecoder_traverse,
    .tp_vectorcall_offset = offsetof(ChoicesDecoder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_members = ChoicesDecoder_members,
};

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_O,
     "configure(chunk_size_state): the http1 parser's state that waits for a chunk's size."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "testbed.clients._readpath",
    .m_doc = "The streamed response's per-read path, compiled (see _readpath.c).",
    .m_size = -1,
    .m_methods = module_methods,
};

#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__readpath(void) {
    INTERN(s_got_bytes, "got_bytes");
    INTERN(s_sink, "_sink");
    INTERN(s_state, "_state");
    INTERN(s_buf, "_buf");
    INTERN(s_parse_read, "_parse_read");
    INTERN(s_on_data, "on_data");
    INTERN(s_on_data_py, "_on_data_py");
    INTERN(s_error_body, "_error_body");
    INTERN(s_sse, "_sse");
    INTERN(s_response, "response");
    INTERN(s_ended, "ended");
    INTERN(s_events, "events");
    INTERN(s_keep_raw, "keep_raw");
    INTERN(s_raw, "raw");
    INTERN(s_decode, "_decode");
    INTERN(s_unreadable, "_unreadable");
    INTERN(s_error, "error");
    INTERN(s_choices, "choices");
    INTERN(s_text, "text");
    INTERN(s_delta, "delta");
    INTERN(s_message, "message");
    INTERN(s_content, "content");
    INTERN(s_chunks, "chunks");
    INTERN(s_finish_reason, "finish_reason");
    INTERN(s_usage, "usage");
    INTERN(s_index, "index");
    if ((one = PyLong_FromLong(1)) == NULL) return NULL;
    PyObject *orjson = PyImport_ImportModule("orjson");
    if (orjson == NULL) return NULL;
    loads = PyObject_GetAttrString(orjson, "loads");
    Py_DECREF(orjson);
    if (loads == NULL) return NULL;
    if (PyType_Ready(&ChunkReaderType) < 0 || PyType_Ready(&EventReaderType) < 0
        || PyType_Ready(&ChoicesDecoderType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "ChunkReader", (PyObject *)&ChunkReaderType) < 0
        || PyModule_AddObjectRef(module, "EventReader", (PyObject *)&EventReaderType) < 0
        || PyModule_AddObjectRef(module, "ChoicesDecoder", (PyObject *)&ChoicesDecoderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
