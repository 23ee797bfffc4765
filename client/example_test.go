package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/posthaste/posthaste/client"
)

// fakeAPI stands in for a Posthaste server so the examples run anywhere.
func fakeAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/emails" && r.Header.Get("Idempotency-Key") == "in-use":
			w.WriteHeader(409)
			io.WriteString(w, `{"statusCode":409,"name":"concurrent_idempotent_requests","message":"Another request with the same key is in progress."}`)
		case r.URL.Path == "/emails":
			io.WriteString(w, `{"id":"0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8e"}`)
		case r.URL.Path == "/emails/batch":
			io.WriteString(w, `{"data":[{"id":"0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8f"}],"errors":[{"index":1,"message":"Missing `+"`to`"+` field."}]}`)
		case r.Method == "PATCH":
			io.WriteString(w, `{"object":"email","id":"0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8e"}`)
		}
	}))
}

func ExampleEmailsService_Send() {
	srv := fakeAPI() // your server: "http://localhost:3000"
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "ph_..."})
	if err != nil {
		panic(err)
	}
	res, err := c.Emails.Send(context.Background(), &client.SendEmailRequest{
		From:        "Acme <onboarding@posthaste.test>",
		To:          []string{"delivered@posthaste.test"},
		Subject:     "Welcome",
		HTML:        "<p>Hello!</p>",
		ScheduledAt: "tomorrow at 9am",
	}, &client.SendOptions{IdempotencyKey: "welcome-user/42"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID)
	// Output: 0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8e
}

func ExampleEmailsService_SendBatch() {
	srv := fakeAPI()
	defer srv.Close()
	c, _ := client.New(client.Config{BaseURL: srv.URL, APIKey: "ph_..."})
	res, err := c.Emails.SendBatch(context.Background(), []client.SendEmailRequest{
		{From: "onboarding@posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "One", HTML: "<p>1</p>"},
		{From: "onboarding@posthaste.test", Subject: "Two", HTML: "<p>2</p>"},
	}, &client.BatchOptions{Validation: client.BatchPermissive, IdempotencyKey: "digest/2026-11-22"})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Data), "accepted")
	for _, e := range res.Errors {
		fmt.Printf("email %d: %s\n", e.Index, e.Message)
	}
	// Output:
	// 1 accepted
	// email 1: Missing `to` field.
}

func ExampleEmailsService_Update() {
	srv := fakeAPI()
	defer srv.Close()
	c, _ := client.New(client.Config{BaseURL: srv.URL, APIKey: "ph_..."})
	ref, err := c.Emails.Update(context.Background(), "0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8e",
		&client.UpdateEmailRequest{ScheduledAt: "in 2 hours"})
	if err != nil {
		panic(err)
	}
	fmt.Println(ref.Object, ref.ID)
	// Output: email 0196f3a2-7c1e-7b3a-9f7e-3d2c1b0a9f8e
}

func ExampleError() {
	srv := fakeAPI()
	defer srv.Close()
	c, _ := client.New(client.Config{BaseURL: srv.URL, APIKey: "ph_..."})
	_, err := c.Emails.Send(context.Background(), &client.SendEmailRequest{
		From: "onboarding@posthaste.test", To: []string{"delivered@posthaste.test"}, Subject: "Hi", HTML: "<p>Hi</p>",
	}, &client.SendOptions{IdempotencyKey: "in-use"})
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Name, "retry:", apiErr.Temporary())
	}
	// Output: 409 concurrent_idempotent_requests retry: true
}
