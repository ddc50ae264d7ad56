/* objstore_gcs.c - gs:// repositories (objstore.h): the Cloud Storage JSON API's listing
 * (objects.list, with a delimiter for the model directories) and media downloads, with a
 * bearer token from the credentials Triton's GCS client reads: the file the "gs" section of
 * TRITON_CLOUD_CREDENTIAL_PATH names for the path, else GOOGLE_APPLICATION_CREDENTIALS (a
 * service account's key, or an authorized user's refresh token: objstore_gauth.c). Against an
 * emulator (CLOUD_STORAGE_EMULATOR_ENDPOINT, as Google's clients read it, or
 * STORAGE_EMULATOR_HOST) GOOGLE_APPLICATION_CREDENTIALS is not used, as Google's clients do
 * not; without credentials requests are anonymous (a public bucket). */
#include "objstore_int.h"

#include "../common/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static nr_status_t *gcs_init(nr_objstore_t *s, const char *rest)
{
    char *loc = nr_os_clean_path(rest);
    nr_status_t *st = nr_os_locate(s, loc);
    free(loc);
    if (st != NULL)
        return st;
    const char *emu = getenv("CLOUD_STORAGE_EMULATOR_ENDPOINT");
    if (emu == NULL || !emu[0])
        emu = getenv("STORAGE_EMULATOR_HOST");
    if (emu != NULL && emu[0]) {
        s->endpoint = strstr(emu, "://") ? nr_strdup(emu) : nr_asprintf("http://%s", emu);
        size_t n = strlen(s->endpoint);
        while (n > 0 && s->endpoint[n - 1] == '/')
            s->endpoint[--n] = '\0';
    } else {
        s->endpoint = nr_strdup("https://storage.googleapis.com");
    }
    /* the credentials: the credential file's for this path, else the environment's */
    nr_buf_t text;
    nr_buf_init(&text);
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *v = NULL;
    char *path = NULL; /* the credentials' file */
    if (nr_os_credential(s, "gs", &text, &doc, &v))
        path = nr_os_jv_string(v);
    nr_json_free(doc);
    nr_buf_free(&text);
    const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    if (path == NULL && env != NULL && env[0] && (emu == NULL || !emu[0]))
        path = nr_strdup(env);
    if (path != NULL && path[0]) {
        nr_buf_t key;
        nr_buf_init(&key);
        if (nr_buf_read_file(&key, path, 1u << 20) != 0) {
            st = nr_status_new(NR_INTERNAL, "failed to read the Google credentials '%s'", path);
            nr_buf_free(&key);
        } else {
            nr_buf_putc(&key, '\0');
            s->gcs_cred = nr_buf_steal(&key, NULL);
        }
    }
    free(path);
    return st;
}

/* A bearer token for the request, fetched again once it is within a minute of expiring. */
static nr_status_t *gcs_authorize(nr_objstore_t *s, CURL *c, struct curl_slist **h)
{
    if (s->gcs_cred == NULL)
        return NULL;
    int64_t now = (int64_t)time(NULL);
    if (s->bearer == NULL || now >= s->bearer_until) {
        char *token = NULL;
        int64_t ttl = 0;
        nr_status_t *st = nr_os_google_token(s->gcs_cred, strlen(s->gcs_cred), &token, &ttl);
        if (st != NULL)
            return st;
        free(s->bearer);
        s->bearer = nr_asprintf("Authorization: Bearer %s", token);
        s->bearer_until = now + (ttl > 120 ? ttl - 60 : ttl / 2);
        free(token);
    }
    *h = curl_slist_append(*h, s->bearer);
    return NULL;
}

static char *gcs_list_url(const nr_objstore_t *s, const char *prefix, bool delimiter,
                          const char *token)
{
    char *bucket = nr_os_escape(s->bucket, false), *pre = nr_os_escape(prefix, false);
    char *tok = token ? nr_os_escape(token, false) : NULL;
    char *url = nr_asprintf("%s/storage/v1/b/%s/o?prefix=%s%s%s%s", s->endpoint, bucket, pre,
                            delimiter ? "&delimiter=%2F" : "", tok ? "&pageToken=" : "",
                            tok ? tok : "");
    free(bucket);
    free(pre);
    free(tok);
    return url;
}

static char *gcs_object_url(const nr_objstore_t *s, const char *key)
{
    char *bucket = nr_os_escape(s->bucket, false), *k = nr_os_escape(key, false);
    char *url = nr_asprintf("%s/storage/v1/b/%s/o/%s?alt=media", s->endpoint, bucket, k);
    free(bucket);
    free(k);
    return url;
}

/* A string member, or a number's text (the API writes int64 as strings; be lenient). */
static char *member(const nr_jv_t *obj, const char *key)
{
    const nr_jv_t *v = nr_jv_get(obj, key);
    if (v == NULL)
        return NULL;
    if (v->type == NR_JV_INT)
        return nr_asprintf("%lld", (long long)v->u.i);
    return nr_os_jv_string(v);
}

static nr_status_t *gcs_list_parse(const nr_objstore_t *s, const char *body, size_t len,
                                   nr_os_list_t *out, char **next)
{
    *next = NULL;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root = NULL;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st != NULL || root->type != NR_JV_OBJECT) {
        nr_status_free(st);
        nr_json_free(doc);
        return nr_status_new(NR_INTERNAL, "failed to list %s: not an objects listing", s->url);
    }
    const nr_jv_t *items = nr_jv_get(root, "items");
    for (size_t i = 0; items != NULL && items->type == NR_JV_ARRAY && i < items->n; i++) {
        const nr_jv_t *it = &items->u.items[i];
        char *name = member(it, "name");
        if (name == NULL)
            continue;
        /* the generation changes with every new content; md5 alone would miss a rewrite of
         * the same bytes, which is no change anyway */
        char *gen = member(it, "generation");
        if (gen == NULL)
            gen = member(it, "md5Hash");
        out->objs = nr_grow(out->objs, out->n_objs, sizeof(nr_os_obj_t));
        out->objs[out->n_objs++] = (nr_os_obj_t){name, gen ? gen : nr_strdup("")};
    }
    const nr_jv_t *pre = nr_jv_get(root, "prefixes");
    for (size_t i = 0; pre != NULL && pre->type == NR_JV_ARRAY && i < pre->n; i++) {
        char *p = nr_os_jv_string(&pre->u.items[i]);
        if (p == NULL)
            continue;
        out->prefixes = nr_grow(out->prefixes, out->n_prefixes, sizeof(char *));
        out->prefixes[out->n_prefixes++] = p;
    }
    *next = member(root, "nextPageToken");
    if (*next != NULL && (*next)[0] == '\0') {
        free(*next);
        *next = NULL;
    }
    nr_json_free(doc);
    return NULL;
}

/* The JSON API's error: {"error": {"code": N, "message": "..."}}. */
static char *gcs_error_text(long status, const char *body, size_t len)
{
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root = NULL;
    char *msg = NULL;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st == NULL)
        msg = nr_os_jv_string(nr_jv_get(nr_jv_get(root, "error"), "message"));
    nr_status_free(st);
    nr_json_free(doc);
    if (msg == NULL && len > 0 && len < 512 && memchr(body, '\0', len) == NULL)
        msg = nr_strndup(body, len); /* the emulator answers some errors in plain text */
    char *t = nr_asprintf("HTTP %ld%s%s", status, msg ? ": " : "", msg ? msg : "");
    free(msg);
    return t;
}

const nr_os_service_t nr_os_gcs = {
    .scheme = "gs://",
    .name = "GCS",
    .init = gcs_init,
    .list_url = gcs_list_url,
    .list_parse = gcs_list_parse,
    .object_url = gcs_object_url,
    .error_text = gcs_error_text,
    .authorize = gcs_authorize,
};
