/* The streamed response's per-read path, compiled: testbed.clients._readpath.
 *
 * A token-by-token stream is one read per token, each carrying one HTTP/1.1 chunk that holds
 * one server-sent event (`data: {...}\n\n`). Three pure functions read that common read's
 * parts: bytes (or a parsed JSON value) in, values out. They keep no state, read no
 * attribute of any Python object and call no Python code but orjson.loads; the Python
 * classes that call them own every state and decide when a read may be taken this way:
 *
 *   whole_chunk(data)    the data of the one whole HTTP/1.1 chunk `data` is, else None
 *                        (http1.CompiledHttp1Connection, between chunks, nothing buffered);
 *   whole_event(data)    the JSON value of the one `data: ...\n\n` event `data` is, else None
 *                        (response.CompiledStreamSink, between events);
 *   plain_choice(obj)    (text, finish_reason, usage) of an OpenAI chunk of the plain shape,
 *                        each None when absent or empty, else None (openai.DECODE).
 *
 * None means "not the common case": the caller hands the input to the Python code, which is
 * the reference and says what is wrong with it. Tests feed both paths the same bytes, split
 * everywhere, and every chunk shape to both decoders.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *s_error, *s_choices, *s_text, *s_delta, *s_message, *s_content,
    *s_finish_reason, *s_usage, *s_index;
static PyObject *loads;

/* The offset of the one whole chunk's data in `p[0:n]` (hex size without an extension, CRLF,
 * data, CRLF) and its size, or 0 when the read is anything else. */
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

static PyObject *whole_chunk(PyObject *module, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "whole_chunk(data): data must be bytes");
        return NULL;
    }
    Py_ssize_t size = 0, start = one_chunk(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &size);
    if (start == 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, size);
}

/* 1 when `p[0:n]` is exactly one `data: ...\n\n` event (its only line ends where it ends). */
static int one_event(const char *p, Py_ssize_t n) {
    return n >= 8 && memcmp(p, "data: ", 6) == 0 && p[n - 1] == '\n'
        && memchr(p, '\n', (size_t)n) == p + n - 2 && memchr(p, '\r', (size_t)n) == NULL;
}

static PyObject *whole_event(PyObject *module, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "whole_event(data): data must be bytes");
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (!one_event(p, n)) Py_RETURN_NONE;
    PyObject *view = PyMemoryView_FromMemory((char *)p + 6, n - 8, PyBUF_READ);
    if (view == NULL) return NULL;
    PyObject *obj = PyObject_CallOneArg(loads, view);
    Py_DECREF(view);
    if (obj == NULL) {  /* [DONE], or not JSON: the Python path reads it and says why */
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return obj;  /* JSON null is None too: the Python path says it is no event of the answer */
}

/* dict.get, with a borrowed reference; NULL (no error set) when the key is absent. */
static PyObject *get(PyObject *dict, PyObject *key) {
    return PyDict_GetItemWithError(dict, key);
}

/* A value's truth (Python's, for the JSON values a chunk holds): 0 for an absent key. */
static int truth(PyObject *value) {
    return value == NULL ? 0 : PyObject_IsTrue(value);
}

/* The first choice's text and finish reason into *text and *reason (borrowed, NULL when
 * absent or empty): 1 plain, 0 not the plain shape, -1 error. */
static int read_choice(PyObject *choice, PyObject **text, PyObject **reason) {
    if (!PyDict_CheckExact(choice)) return 0;
    PyObject *index = get(choice, s_index);
    if (index != NULL && index != Py_None) {  /* only choice 0 is read here */
        int overflow = 0;
        if (!PyLong_CheckExact(index) || PyLong_AsLongAndOverflow(index, &overflow) != 0
            || overflow)
            return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *t = get(choice, s_text);
    if (t == NULL || t == Py_None) {
        PyObject *message = get(choice, s_delta);
        int has = truth(message);
        if (has < 0) return -1;
        if (!has) message = get(choice, s_message);
        has = truth(message);
        if (has < 0) return -1;
        t = NULL;
        if (has) {
            if (!PyDict_CheckExact(message)) return 0;
            t = get(message, s_content);
        }
    }
    int has_text = truth(t);
    if (has_text < 0) return -1;
    if (has_text && !PyUnicode_CheckExact(t)) return 0;
    PyObject *r = get(choice, s_finish_reason);
    int has_reason = truth(r);
    if (has_reason < 0) return -1;
    if (has_reason && !PyUnicode_CheckExact(r)) return 0;
    if (PyErr_Occurred()) return -1;
    *text = has_text ? t : NULL;
    *reason = has_reason ? r : NULL;
    return 1;
}

/* plain_choice(obj): OpenAI's decode_chunk for the plain shape of a completions or chat
 * chunk — a dict whose "error" is absent or empty, whose "choices" is a list (or null), whose
 * first choice is a dict with index 0 (or none), string text (under text, delta.content or
 * message.content) and string finish reason, whose usage is a dict — as the values to write;
 * None for anything else. */
static PyObject *plain_choice(PyObject *module, PyObject *obj) {
    if (!PyDict_CheckExact(obj)) Py_RETURN_NONE;
    PyObject *error = get(obj, s_error), *choices = get(obj, s_choices);
    PyObject *text = NULL, *reason = NULL;
    if (PyErr_Occurred()) return NULL;
    int has_error = truth(error);
    if (has_error < 0) return NULL;
    if (has_error || choices == NULL) Py_RETURN_NONE;  /* an error object: decode_chunk's words */
    if (choices != Py_None) {
        if (!PyList_CheckExact(choices)) Py_RETURN_NONE;
        if (PyList_GET_SIZE(choices)) {
            int plain = read_choice(PyList_GET_ITEM(choices, 0), &text, &reason);
            if (plain < 0) return NULL;
            if (!plain) Py_RETURN_NONE;
        }
    }
    PyObject *usage = get(obj, s_usage);
    if (PyErr_Occurred()) return NULL;
    int has_usage = truth(usage);
    if (has_usage < 0) return NULL;
    if (has_usage && !PyDict_CheckExact(usage)) Py_RETURN_NONE;
    return PyTuple_Pack(3, text ? text : Py_None, reason ? reason : Py_None,
                        has_usage ? usage : Py_None);
}

static PyMethodDef module_methods[] = {
    {"whole_chunk", whole_chunk, METH_O,
     "whole_chunk(data): the data of the one whole HTTP/1.1 chunk data is, else None."},
    {"whole_event", whole_event, METH_O,
     "whole_event(data): the JSON value of the one `data: ...` event data is, else None."},
    {"plain_choice", plain_choice, METH_O,
     "plain_choice(obj): (text, finish_reason, usage) of a plain OpenAI chunk, else None."},
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
    /* the keys of OpenAI's JSON chunks (wire names, not Python attributes) */
    INTERN(s_error, "error");
    INTERN(s_choices, "choices");
    INTERN(s_text, "text");
    INTERN(s_delta, "delta");
    INTERN(s_message, "message");
    INTERN(s_content, "content");
    INTERN(s_finish_reason, "finish_reason");
    INTERN(s_usage, "usage");
    INTERN(s_index, "index");
    PyObject *orjson = PyImport_ImportModule("orjson");
    if (orjson == NULL) return NULL;
    loads = PyObject_GetAttrString(orjson, "loads");
    Py_DECREF(orjson);
    if (loads == NULL) return NULL;
    return PyModule_Create(&module_def);
}
