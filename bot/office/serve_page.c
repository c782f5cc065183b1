/*
 * serve_page.c - the frame of every page of the review page (serve-int.h): the head, the
 * navigation (with who is signed in), the footer and the style sheet; banners; the short
 * pages that say one thing; posted forms decoded; the queue opened for one request.
 */
#include "office/serve-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/text.h"
#include "apbot/report.h"
#include "apbot/secret.h"
#include "apbot/store.h"
#include "office/report_html.h"

static const char serve_css[] =
    "header{display:flex;flex-wrap:wrap;gap:1.2em;align-items:baseline;"
    "border-bottom:2px solid #345;padding-bottom:.4em;margin-bottom:1em}"
    "header .brand{font-weight:bold;color:#345}"
    "nav a{margin-right:1em;text-decoration:none;color:#234}"
    "nav a.active{font-weight:bold;border-bottom:2px solid #234}"
    "header .where{color:#777;font-size:12px}"
    ".banner{padding:.7em 1em;border-radius:4px;margin:1em 0}"
    ".banner.ok{background:#e3f4e1;border:1px solid #9ccf95}"
    ".banner.refused{background:#fbe0e0;border:1px solid #c00}"
    ".banner.warn{background:#fff1d6;border:1px solid #e3b75f}"
    "pre.excerpt{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;"
    "border:1px solid #ddd;padding:.5em;max-height:24em;overflow:auto;font-size:12px}"
    ".exchange{border-left:3px solid #ccd;padding:.2em .8em;margin:.8em 0}"
    /* a URL, a key or an ERP's message has no blanks to break at: break anywhere rather than
     * draw the page wider than the window */
    "code.url{overflow-wrap:anywhere;word-break:break-all}"
    "dl.fields dd,td.detail,td.actor,td.reason,td.key{overflow-wrap:anywhere}"
    ".exchange .rule{font-weight:bold}"
    ".decisions{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}"
    "form.decision{border:1px solid #ccc;border-radius:4px;padding:.6em 1em;min-width:18em;"
    "max-width:28em}"
    "form.decision h3{margin:.2em 0 .5em;font-size:1em}"
    "form.decision label{display:block;margin:.4em 0 .1em;font-weight:bold}"
    "form.decision p.help{color:#555;font-size:12px;margin:.2em 0}"
    "input[type=text],input[type=date],textarea,select{font:inherit;padding:.25em;"
    "box-sizing:border-box;width:100%}"
    "button{font:inherit;padding:.3em 1em;margin-top:.6em}"
    "form.filters{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-end;margin:.5em 0}"
    "form.filters label{display:block;font-weight:bold}"
    "form.filters input,form.filters select{width:auto;min-width:14em}"
    "table.queue td.reason{max-width:32em}"
    "dl.fields{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}"
    "dl.fields dt{font-weight:bold}dl.fields dd{margin:0}"
    ".state{font-weight:bold}"
    "header .who{margin-left:auto;color:#345;font-size:13px}"
    "header .who .name{font-weight:bold}"
    "form.logout{display:inline;margin-left:.6em}form.logout button{margin:0;padding:.1em .6em}"
    "form.login{max-width:22em;border:1px solid #ccc;border-radius:4px;padding:.6em 1em}"
    "form.login label{display:block;margin:.5em 0 .1em;font-weight:bold}"
    "input[type=password]{font:inherit;padding:.25em;box-sizing:border-box;width:100%}"
    "p.readonly{color:#555}"
    "footer{margin-top:2em;color:#777;font-size:12px}"
    "@media print{header nav,form,.no-print{display:none}pre.excerpt{max-height:none}}";

void serve_page_start(struct serve_page *p, struct serve_ctx *c, const char *title,
                      const char *active)
{
    static const struct {
        const char *href, *id, *label;
    } nav[] = {{"/", "today", "Today"},
               {"/queue", "queue", "Review queue"},
               {"/queue?tab=exceptions", "exceptions", "Business exceptions"},
               {"/report", "report", "Report"}};
    xmlNodePtr head, meta, n, header, navn;
    char buf[256];

    memset(p, 0, sizeof(*p));
    p->status = MHD_HTTP_OK;
    html_doc_new(&p->doc);
    head = p->doc.head;
    meta = html_el(head, "meta", NULL);
    html_attr(meta, "name", "viewport");
    html_attr(meta, "content", "width=device-width, initial-scale=1");
    snprintf(buf, sizeof(buf), "%s - apbot review", title);
    html_el_clean(head, "title", NULL, buf);
    n = html_el(head, "link", NULL);
    html_attr(n, "rel", "stylesheet");
    html_attr(n, "href", "/app.css");

    p->body = html_el(p->doc.html, "body", NULL);
    header = html_el(p->body, "header", NULL);
    html_el_clean(header, "span", "brand", "apbot review");
    /* the pages and the queue's name only for who may see them */
    if (serve_access_decide(c->s->mode, c->who.known, c->who.role, SERVE_ROUTE_VIEW) ==
        SERVE_ALLOW) {
        navn = html_el(header, "nav", NULL);
        for (size_t i = 0; i < sizeof(nav) / sizeof(nav[0]); i++)
            serve_link(navn, nav[i].href,
                       active && strcmp(active, nav[i].id) == 0 ? "active" : NULL, nav[i].label);
        n = html_el(header, "span", "where");
        html_textf_clean(n, "queue %s, flow %s", c->s->opt->db_path,
                         c->s->opt->flow && c->s->opt->flow->name ? c->s->opt->flow->name : "?");
    }
    serve_auth_header(c, header);
    p->main = html_el(p->body, "main", NULL);
}

enum MHD_Result serve_page_send(struct serve_ctx *c, struct serve_page *p)
{
    xmlChar *mem;
    size_t size;
    enum MHD_Result rc;
    xmlNodePtr foot = html_el(p->body, "footer", NULL);
    char when[32];

    html_textf_clean(foot, "apbot %s, page made %s", APBOT_VERSION,
                     report_local_time(c->now, "?", when, sizeof(when)));
    mem = html_doc_dump(&p->doc, &size);
    if (!mem)
        return MHD_NO;
    rc = serve_send(c, p->status, "text/html; charset=utf-8", mem, size, false);
    xmlFree(mem);
    return rc;
}

/* A banner: cls "ok", "refused" or "warn". */
xmlNodePtr serve_banner(xmlNodePtr parent, const char *cls, const char *id, const char *t)
{
    char k[32];
    xmlNodePtr n;
    snprintf(k, sizeof(k), "banner %s", cls);
    n = html_el_clean(parent, "div", k, t);
    if (id)
        html_id(n, id);
    html_attr(n, "role", strcmp(cls, "ok") == 0 ? "status" : "alert");
    return n;
}

/* A short page that says one thing (errors, refusals). */
enum MHD_Result serve_simple_page(struct serve_ctx *c, int status, const char *title,
                                  const char *what)
{
    struct serve_page p;
    serve_page_start(&p, c, title, NULL);
    p.status = status;
    html_el_clean(p.main, "h1", NULL, title);
    serve_banner(p.main, status < 400 ? "ok" : "refused", "message", what);
    return serve_page_send(c, &p);
}

xmlNodePtr serve_link(xmlNodePtr parent, const char *href, const char *cls, const char *t)
{
    xmlNodePtr a = html_el_clean(parent, "a", cls, t);
    html_attr_clean(a, "href", href);
    return a;
}

void serve_hidden(xmlNodePtr form, const char *name, const char *value)
{
    xmlNodePtr n = html_el(form, "input", NULL);
    html_attr(n, "type", "hidden");
    html_attr(n, "name", name);
    html_attr_clean(n, "value", value);
}

/* ---- posted forms ----------------------------------------------------------------------- */

void serve_form_parse(struct serve_form *f, const char *body)
{
    const char *p = body ? body : "";
    memset(f, 0, sizeof(*f));
    while (*p && f->n < SERVE_FIELDS_MAX) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (eq) {
            f->names[f->n] = text_form_decode(p, (size_t)(eq - p));
            f->values[f->n] = text_form_decode(eq + 1, len - (size_t)(eq - p) - 1);
            f->n++;
        }
        p += len + (p[len] == '&');
    }
}

const char *serve_form_get(const struct serve_form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return f->values[i];
    return NULL;
}

void serve_form_done(struct serve_form *f)
{
    for (size_t i = 0; i < f->n; i++) {
        secret_free(f->names[i]);
        secret_free(f->values[i]);
    }
    f->n = 0;
}

/* Every occurrence of the ERP user or password replaced by "***" (heap). */
char *serve_mask(const struct serve_server *s, const char *text)
{
    struct apbot_buf b;
    const char *u = s->erp_user, *p = s->erp_password;
    size_t ul = u ? strlen(u) : 0, pl = p ? strlen(p) : 0;

    apbot_buf_init(&b, strlen(text) * 3 + 1);
    for (size_t i = 0; text[i];) {
        int rc;
        if (pl && strncmp(text + i, p, pl) == 0) {
            rc = apbot_buf_adds(&b, "***");
            i += pl;
        } else if (ul && strncmp(text + i, u, ul) == 0) {
            rc = apbot_buf_adds(&b, "***");
            i += ul;
        } else {
            rc = apbot_buf_add(&b, text + i, 1);
            i++;
        }
        if (rc != APBOT_OK)
            break; /* cannot happen: three bytes per input byte at most */
    }
    return apbot_buf_steal(&b, NULL);
}

struct store *serve_store_open(struct serve_ctx *c, char *err, size_t errlen)
{
    struct store *st = NULL;
    if (store_open(c->s->opt->db_path, &st, err, errlen) != APBOT_OK)
        return NULL;
    return st;
}

enum MHD_Result serve_store_failed(struct serve_ctx *c, const char *err)
{
    char buf[APBOT_ERR_LEN + 64];
    snprintf(buf, sizeof(buf), "The queue could not be read: %s", err);
    return serve_simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Queue unavailable", buf);
}

enum MHD_Result serve_send_css(struct serve_ctx *c)
{
    struct apbot_buf b;
    enum MHD_Result rc;
    apbot_buf_init(&b, 64 * 1024);
    if (apbot_buf_adds(&b, report_html_css()) != APBOT_OK ||
        apbot_buf_adds(&b, serve_css) != APBOT_OK)
        abort(); /* two constant strings far below the bound */
    rc = serve_send(c, MHD_HTTP_OK, "text/css; charset=utf-8", apbot_buf_str(&b), b.len, true);
    apbot_buf_done(&b);
    return rc;
}
