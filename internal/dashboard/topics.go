package dashboard

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/store"
)

// topicForm is what the topic forms hold, kept when shown again.
type topicForm struct {
	Name, Description, DefaultSubscription, Visibility string
}

type topicsData struct {
	Topics []store.Topic
	Form   topicForm
	Error  formError
}

func (h *audienceHandler) topics(w http.ResponseWriter, r *http.Request, se *store.Session) {
	h.renderTopics(w, r, se, http.StatusOK, topicsData{Form: topicForm{DefaultSubscription: store.TopicOptIn,
		Visibility: audience.TopicVisibilityPrivate}})
}

func (h *audienceHandler) renderTopics(w http.ResponseWriter, r *http.Request, se *store.Session, status int, d topicsData) {
	list, _, err := h.svc.ListTopics(r.Context(), se.TeamID, store.Page{Limit: 100})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d.Topics = list
	h.render(w, status, "topics", view{Title: "Topics", Nav: "topics", Session: se, CSRF: se.CSRFToken, Data: d})
}

func topicFormOf(r *http.Request) topicForm {
	return topicForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		DefaultSubscription: r.PostFormValue("default_subscription"), Visibility: r.PostFormValue("visibility")}
}

func (h *audienceHandler) addTopic(w http.ResponseWriter, r *http.Request, se *store.Session) {
	f := topicFormOf(r)
	t, err := h.svc.CreateTopic(r.Context(), se.TeamID, audience.TopicInput{Name: &f.Name, Description: &f.Description,
		Visibility: &f.Visibility, DefaultSubscription: &f.DefaultSubscription, FieldsFirst: true})
	if fe, ok := fieldError(err); ok {
		h.renderTopics(w, r, se, http.StatusUnprocessableEntity, topicsData{Form: f, Error: fe})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/topics/"+t.ID.String()+"?done=added", http.StatusSeeOther)
}

type topicData struct {
	Topic  store.Topic
	Form   topicForm
	Notice string
	Error  formError
}

var topicNotices = map[string]string{"added": "Topic added.", "saved": "Topic saved."}

func (h *audienceHandler) loadTopic(w http.ResponseWriter, r *http.Request, se *store.Session) (store.Topic, bool) {
	return byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Topic, error) {
		return h.svc.Topic(r.Context(), se.TeamID, id)
	})
}

func (h *audienceHandler) topic(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTopic(w, r, se)
	if !ok {
		return
	}
	h.renderTopic(w, se, http.StatusOK, "topic", topicData{Topic: t, Notice: topicNotices[r.URL.Query().Get("done")],
		Form: topicForm{Name: t.Name, Description: t.Description, Visibility: t.Visibility}})
}

func (h *audienceHandler) renderTopic(w http.ResponseWriter, se *store.Session, status int, page string, d topicData) {
	title := d.Topic.Name
	if page == "topic_delete" {
		title = "Delete " + title
	}
	h.render(w, status, page, view{Title: title, Nav: "topics", Session: se, CSRF: se.CSRFToken, Data: d})
}

// editTopic saves a topic's name, description and visibility; its
// default subscription is fixed at creation.
func (h *audienceHandler) editTopic(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTopic(w, r, se)
	if !ok {
		return
	}
	f := topicFormOf(r)
	saved, err := h.svc.UpdateTopic(r.Context(), se.TeamID, t.ID, audience.TopicInput{Name: &f.Name, Description: &f.Description,
		Visibility: &f.Visibility})
	if fe, ok := fieldError(err); ok {
		h.renderTopic(w, se, http.StatusUnprocessableEntity, "topic", topicData{Topic: t, Form: f, Error: fe})
		return
	}
	if err != nil {
		h.failOr404(w, r, err)
		return
	}
	http.Redirect(w, r, "/dashboard/topics/"+saved.ID.String()+"?done=saved", http.StatusSeeOther)
}

func (h *audienceHandler) deleteTopicPage(w http.ResponseWriter, r *http.Request, se *store.Session) {
	t, ok := h.loadTopic(w, r, se)
	if !ok {
		return
	}
	h.renderTopic(w, se, http.StatusOK, "topic_delete", topicData{Topic: t})
}

func (h *audienceHandler) deleteTopic(w http.ResponseWriter, r *http.Request, se *store.Session) {
	_, ok := byPathID(h.Handler, w, r, func(id uuid.UUID) (store.Topic, error) {
		return h.svc.DeleteTopic(r.Context(), se.TeamID, id)
	})
	if !ok {
		return
	}
	http.Redirect(w, r, "/dashboard/topics", http.StatusSeeOther)
}
